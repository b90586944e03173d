"""One-run audits (Steinke, Nasr & Jagielski 2023) of the convex head and of the knowledge-transfer pipeline.

Part 1, the convex head (output perturbation).

m canaries, canary i the record (e_i, y_i) with feature e_i (a unit basis vector of R^m) and
label y_i = 2·S_i − 1 for a fair coin S_i; flipping one coin replaces one record (the head's
neighbouring relation). One :class:`~pate_stab.erm.heads.PrivateLinearHead` (logistic loss,
output perturbation) is trained on the canaries; the auditor's score for canary i is the
released weight w_i. Guess counts r are fixed in advance; the bound reported is the largest
over them at a Bonferroni-corrected confidence, so it holds at the stated confidence overall.

A negative control trains the same head with the noise of a 100× larger ε while still claiming
ε (a broken calibration): the audit must certify more than the claim there.

Part 2, the knowledge-transfer pipeline (:mod:`pate_stab.audit.transfer_canary`): canaries included with
probability ½, each breaking a planted tie in the teachers' votes on its own query; 1-NN
teachers (the guarantee is model-agnostic); the pipeline's partition, aggregators and student.
The scores are the released labels and the student's log-odds on the canary queries. Correct:
the stability releaser (seeded and secure noise) and LNMax at their calibrations. Broken, same
claims: the plurality vote without noise, LNMax with 1/1000 of its noise. Each row reports the
bound at 95 % next to the claim and the largest ε the guesses could certify at all.

    python recipes/diagnostics/audit_one_run.py --canaries 1000 --epsilons 1 4 16 --out checkpoints/audit_one_run
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from pate_stab.audit.one_run import best_one_run_audit
from pate_stab.audit.transfer_canary import VARIANTS, audit_transfer
from pate_stab.erm.heads import PrivateLinearHead
from pate_stab.rng import seeded_generator, spawn_generators


def audit_head(
    *, epsilon: float, train_epsilon: float, canaries: int, lam: float, confidence: float, generator: torch.Generator
) -> dict[str, object]:
    coin_gen, noise_gen = spawn_generators(generator, 2)
    secrets = torch.randint(0, 2, (canaries,), generator=coin_gen)
    x = torch.eye(canaries, dtype=torch.float64)
    y = (2 * secrets - 1).to(torch.float64)
    head = PrivateLinearHead(epsilon=train_epsilon, lam=lam, loss="logistic", mechanism="output", classes=(-1, 1))
    head.fit(x, y, generator=noise_gen)
    scores = head.decision_function(x)  # w_i: canary i's weight
    guesses = sorted({g - g % 2 for g in (canaries // 50, canaries // 10, canaries // 2, canaries) if g >= 2})
    best, audits = best_one_run_audit(scores, secrets, guesses=guesses, confidence=confidence)
    return {
        "claimed_epsilon": epsilon,
        "noise_for_epsilon": train_epsilon,
        "canaries": canaries,
        "confidence": confidence,
        "epsilon_lower_bound": best.epsilon_lower_bound,
        "best_guesses": best.num_guesses,
        "correct": best.num_correct,
        "per_guess_count": {a.num_guesses: [a.num_correct, a.epsilon_lower_bound] for a in audits},
        "violates": best.epsilon_lower_bound > epsilon,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--canaries", type=int, default=1000)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 4.0, 16.0])
    parser.add_argument("--lam", type=float, default=1e-2)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--transfer-canaries", type=int, default=500)
    parser.add_argument("--transfer-teachers", type=int, default=401)
    parser.add_argument("--transfer-epsilon", type=float, default=3.0)
    parser.add_argument("--transfer-delta", type=float, default=1e-6)
    parser.add_argument("--transfer-private", type=int, default=8000)
    parser.add_argument("--transfer-variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--out", type=Path, default=Path("checkpoints/audit_one_run"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    gens = spawn_generators(seeded_generator(args.seed), 2 * len(args.epsilons))
    rows = []
    for i, eps in enumerate(args.epsilons):
        for j, (kind, train_eps) in enumerate((("correct", eps), ("broken: noise for 100·ε", 100 * eps))):
            row = audit_head(
                epsilon=eps,
                train_epsilon=train_eps,
                canaries=args.canaries,
                lam=args.lam,
                confidence=args.confidence,
                generator=gens[2 * i + j],
            )
            rows.append({"head": kind, **row})
            print(
                f"{kind:24s} claimed ε = {eps:6.2f}   audit lower bound = {row['epsilon_lower_bound']:.3f} "
                f"({row['correct']}/{row['best_guesses']} correct, {args.confidence:.0%} confidence)   "
                f"violates = {row['violates']}"
            )
    transfer_rows = []
    for variant, gen in zip(
        args.transfer_variants,
        spawn_generators(seeded_generator(args.seed + 1), len(args.transfer_variants)),
        strict=True,
    ):
        t0 = time.perf_counter()
        row = audit_transfer(
            variant,
            num_canaries=args.transfer_canaries,
            num_teachers=args.transfer_teachers,
            epsilon=args.transfer_epsilon,
            delta=args.transfer_delta,
            num_private=args.transfer_private,
            confidence=args.confidence,
            generator=gen,
        )
        row["wall_s"] = time.perf_counter() - t0
        transfer_rows.append(row)
        lab, stu = row["labels"], row["student"]
        print(
            f"transfer {variant:17s} claimed ε = {row['claimed_epsilon']:.3f} (δ = {row['claimed_delta']:.0e})  "
            f"labels: {lab['epsilon_lower_bound']:.3f} ({lab['correct']}/{lab['guesses']})  "
            f"student: {stu['epsilon_lower_bound']:.3f} ({stu['correct']}/{stu['guesses']})  "
            f"max certifiable {row['max_certifiable_epsilon']:.2f}  task answered {row['task_queries_answered']}"
            f"  violates = {row['violates']}",
            flush=True,
        )
    (args.out / "report.json").write_text(
        json.dumps(
            {"config": {k: str(v) for k, v in vars(args).items()}, "rows": rows, "transfer": transfer_rows}, indent=2
        )
    )
    print(f"wrote {args.out / 'report.json'} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
