"""pate_stab.student: the student of BTT18 Alg 5, trained on what the releaser published.

Usage (``ModelSpec`` and ``FixMatchConfig``: :mod:`pate_stab.models`, the model code shared with the
teachers)::

    targets = hard_targets(release.labels, num_classes=10, bottom="drop")
    student = train_student(public_queries, targets, spec=ModelSpec("mlp", (50,), 10),
                            generator=g_student, unlabelled_x=rest_of_public_pool)
    acc = student.accuracy(eval_x, eval_y)

    # a CNN on a few labelled images and the unlabelled rest of the pool (FixMatch)
    fm = train_fixmatch(labelled_images, labels, pool_images, num_classes=10,
                        config=FixMatchConfig.cpu(), generator=g_student)
"""

from pate_stab.student.fixmatch import FixMatchModule, FixMatchStudent, train_fixmatch
from pate_stab.student.targets import BottomPolicy, StudentTargets, hard_targets, soft_targets
from pate_stab.student.training import Student, StudentConfig, StudentModule, train_student

__all__ = [
    "BottomPolicy",
    "FixMatchModule",
    "FixMatchStudent",
    "Student",
    "StudentConfig",
    "StudentModule",
    "StudentTargets",
    "hard_targets",
    "soft_targets",
    "train_fixmatch",
    "train_student",
]
