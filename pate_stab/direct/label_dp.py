"""Direct label-DP learners: LP-1ST and LP-2ST (Ghazi et al. 2021), ALIBI (Malek et al. 2021) on feature vectors.

Source: Ghazi, Golowich, Kumar, Manurangsi & Zhang 2021, "Deep Learning with Label Differential
Privacy" (NeurIPS). Both learners randomise every private label **once** with RRWithPrior
(:func:`pate_stab.privacy.mechanisms.randomized_response.rr_with_prior`, their Alg 2) and train a model on the
randomised labels; the model is post-processing of the randomised labels and the (public) inputs.

* **LP-1ST** (one stage): every label by RRWithPrior with the uniform prior, which is C-ary
  randomised response (:func:`~pate_stab.privacy.mechanisms.randomized_response.randomized_response`); one
  model trained on all of them.
* **LP-2ST** (two stages, their multi-stage training, Alg 3 with two stages): the private set is split
  in two disjoint halves by a random permutation drawn independently of the labels. Stage 1: half 1's
  labels by randomised response, a model trained on them. Stage 2: that model's prediction on each
  half-2 input is the prior of RRWithPrior for its label; the final model is trained on both halves'
  randomised labels.

Privacy. Each label enters exactly one randomiser, and each randomiser is ε-DP in its label. The
stage-2 prior is computed from stage-1 outputs and inputs only, so it is fixed given those outputs
and stage 2 is ε-DP in each half-2 label for every value of them (adaptive parallel composition
over disjoint labels). Changing one label changes the input of one randomiser: the whole output is
**ε-label-DP**, neighbouring data sets differing in one example's label (Ghazi et al. Def 1). The
inputs are not protected: these learners are valid only where the inputs are public (the run's
``privacy_unit: label``).

Prior. The stage-1 model is trained on randomised labels, so it estimates the law of the
*randomised* label, P[ỹ | x] = q·P[y | x] + ((1 − q)/(C − 1))·(1 − P[y | x]) for C-ary randomised
response with keep probability q. The prior is that estimate mapped back through the known,
public channel, P[y | x] = (P[ỹ | x] − r)/(q − r) with r = (1 − q)/(C − 1), clipped at 0 and
renormalised: post-processing, with the same class order as the model's own prediction.

* **ALIBI** (Malek et al. 2021, "Antipodes of Label Differential Privacy: PATE and ALIBI", NeurIPS,
  Sec. 3): every label released once as its one-hot vector plus exact discrete Laplace noise
  (:mod:`pate_stab.privacy.mechanisms.alibi`), the Bayesian posterior under the uniform prior as soft labels,
  one model trained on them. The paper's iterative re-estimation of the prior is not implemented.

Models: a linear softmax layer on the features standardised with the public pool's mean and
standard deviation, trained by full-batch L-BFGS on the cross-entropy with the L2 weight
:data:`LABEL_DP_WEIGHT_DECAY` (fixed in advance, never chosen on evaluation or pool labels).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from pate_stab._checks import check_int, check_positive
from pate_stab.privacy.mechanisms.alibi import alibi_posterior, alibi_release
from pate_stab.privacy.mechanisms.randomized_response import randomized_response, rr_keep_probability, rr_with_prior
from pate_stab.privacy.noise.discrete import RandomSource

__all__ = [
    "LABEL_DP_LEARNERS",
    "LABEL_DP_MAX_ITER",
    "LABEL_DP_WEIGHT_DECAY",
    "LabelDPModel",
    "channel_corrected_prior",
    "fit_softmax",
    "train_lp_1st",
    "train_alibi",
    "train_lp_2st",
]

LABEL_DP_LEARNERS = {
    "rr-lp1st": "LP-1ST: randomised response on every label, one model (Ghazi et al. 2021, Alg 2, uniform prior)",
    "rr-lp2st": "LP-2ST: RR on half the labels, then RR-with-prior from that model on the rest (Ghazi et al. 2021, "
    "Alg 2 and 3)",
    "alibi": "ALIBI: discrete Laplace on the one-hot labels, a model on the Bayesian posterior (Malek et al. 2021)",
}
"""The label-DP learners of this module (their names as ``compare --direct`` rows)."""
LABEL_DP_WEIGHT_DECAY = 1e-4
"""L2 weight of the softmax layers (fixed in advance)."""
LABEL_DP_MAX_ITER = 300
"""L-BFGS iterations of each softmax fit (fixed in advance)."""


@dataclass
class LabelDPModel:
    """A trained label-DP learner: the linear layer on standardised features, and what it drew.

    ``stages``: the private indices randomised in each stage (disjoint; together every index once).
    ``noisy_labels``: the randomised labels, by private index (kept in memory, never written).
    """

    weight: Tensor
    bias: Tensor
    mean: Tensor
    std: Tensor
    stages: list[Tensor]
    noisy_labels: Tensor

    def logits(self, x: Tensor) -> Tensor:
        return ((x.float() - self.mean) / self.std) @ self.weight.T + self.bias

    def predict(self, x: Tensor) -> Tensor:
        return torch.argmax(self.logits(x), dim=1)


def fit_softmax(
    z: Tensor,
    labels: Tensor,
    num_classes: int,
    *,
    weight_decay: float = LABEL_DP_WEIGHT_DECAY,
    max_iter: int = LABEL_DP_MAX_ITER,
) -> tuple[Tensor, Tensor]:
    """A linear softmax layer (weight (C, d), bias (C,)) fitted by full-batch L-BFGS on the mean
    cross-entropy plus (weight_decay / 2)·||W||². ``labels``: class indices (n,), or soft labels
    (n, C) (rows of probabilities). Deterministic (starts at zero)."""
    z = z.float()
    weight = torch.zeros(num_classes, z.shape[1], requires_grad=True)
    bias = torch.zeros(num_classes, requires_grad=True)
    opt = torch.optim.LBFGS([weight, bias], max_iter=max_iter, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-6, tolerance_change=1e-9)  # fmt: skip
    target = labels.to(torch.float32) if labels.dim() == 2 else labels.to(torch.int64)

    def closure() -> Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(z @ weight.T + bias, target)
        loss = loss + 0.5 * weight_decay * (weight * weight).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return weight.detach(), bias.detach()


def channel_corrected_prior(probs: Tensor, epsilon: float) -> Tensor:
    """P[y | x] from a model's P[ỹ | x] under C-ary randomised response at ε (module docstring).

    Rows whose correction is all zero fall back to the model's own probabilities.
    """
    c = probs.shape[1]
    q = float(rr_keep_probability(epsilon, c))
    r = (1.0 - q) / (c - 1)
    out = ((probs.double() - r) / (q - r)).clamp(min=0.0)
    total = out.sum(dim=1, keepdim=True)
    return torch.where(total > 0, out / total.clamp(min=1e-300), probs.double())


def _check(x: Tensor, labels: Tensor, num_classes: int, epsilon: float) -> tuple[int, float]:
    num_classes = check_int("num_classes", num_classes, minimum=2)
    epsilon = check_positive("epsilon", epsilon)
    if x.dim() != 2 or labels.shape != (x.shape[0],):
        raise ValueError(f"need features (n, d) and n labels, got {tuple(x.shape)} and {tuple(labels.shape)}")
    if x.shape[0] < 2:
        raise ValueError("the label-DP learners need at least 2 private examples")
    return num_classes, epsilon


def train_lp_1st(
    x: Tensor,
    labels: Tensor,
    *,
    num_classes: int,
    epsilon: float,
    mean: Tensor,
    std: Tensor,
    source: RandomSource | None = None,
) -> LabelDPModel:
    """LP-1ST: every label by C-ary randomised response at ε (exact draws from ``source``), then one
    softmax layer on the features standardised with the public ``mean`` and ``std``. ε-label-DP."""
    num_classes, epsilon = _check(x, labels, num_classes, epsilon)
    everyone = torch.arange(x.shape[0])
    noisy = randomized_response(labels, num_classes, epsilon, source=source)
    weight, bias = fit_softmax((x.float() - mean) / std, noisy, num_classes)
    return LabelDPModel(weight, bias, mean, std, [everyone], noisy)


def train_lp_2st(
    x: Tensor,
    labels: Tensor,
    *,
    num_classes: int,
    epsilon: float,
    mean: Tensor,
    std: Tensor,
    generator: torch.Generator,
    source: RandomSource | None = None,
) -> LabelDPModel:
    """LP-2ST (module docstring): halves from a permutation drawn with ``generator`` (independent of
    the labels), RR on half 1, RRWithPrior on half 2 with the stage-1 model's channel-corrected
    prediction as prior, one softmax layer on both. Each label is randomised once: ε-label-DP."""
    num_classes, epsilon = _check(x, labels, num_classes, epsilon)
    n = x.shape[0]
    perm = torch.randperm(n, generator=generator)
    first, second = perm[: n // 2], perm[n // 2 :]
    z = (x.float() - mean) / std
    noisy = torch.empty(n, dtype=torch.int64)
    noisy[first] = randomized_response(labels[first], num_classes, epsilon, source=source)
    weight, bias = fit_softmax(z[first], noisy[first], num_classes)
    probs = torch.softmax(z[second] @ weight.T + bias, dim=1)
    prior = channel_corrected_prior(probs, epsilon)
    noisy[second] = rr_with_prior(labels[second], prior, epsilon, source=source)
    weight, bias = fit_softmax(z, noisy, num_classes)
    return LabelDPModel(weight, bias, mean, std, [first, second], noisy)


def train_alibi(
    x: Tensor,
    labels: Tensor,
    *,
    num_classes: int,
    epsilon: float,
    mean: Tensor,
    std: Tensor,
    source: RandomSource | None = None,
) -> LabelDPModel:
    """ALIBI (Malek et al. 2021, Sec. 3) without its iterations: every label released once as
    M·onehot + exact discrete Laplace (:func:`~pate_stab.privacy.mechanisms.alibi.alibi_release`), the posterior
    under the uniform prior as soft labels, one softmax layer on them. ε-label-DP.

    ``noisy_labels`` holds the posterior's argmax (the soft labels are what the layer is fitted on).
    """
    num_classes, epsilon = _check(x, labels, num_classes, epsilon)
    released = alibi_release(labels, num_classes, epsilon, source=source)
    soft = alibi_posterior(released, epsilon)
    weight, bias = fit_softmax((x.float() - mean) / std, soft, num_classes)
    return LabelDPModel(weight, bias, mean, std, [torch.arange(x.shape[0])], torch.argmax(soft, dim=1))
