"""pate_stab.student: the student of BTT18 Alg 5, trained on what the releaser published.

Usage::

    targets = hard_targets(release.labels, num_classes=10, bottom="drop")
    student = train_student(public_queries, targets, spec=ModelSpec("mlp", (50,), 10),
                            generator=g_student, unlabelled_x=rest_of_public_pool)
    acc = student.accuracy(eval_x, eval_y)

    # a CNN on a few labelled images and the unlabelled rest of the pool (FixMatch)
    fm = train_fixmatch(labelled_images, labels, pool_images, num_classes=10,
                        config=FixMatchConfig.cpu(), generator=g_student)
"""

from pate_stab.student.augment import AUGMENTATIONS, augmentation_settings, cutout_size, strong_augment, weak_augment
from pate_stab.student.fixmatch import FixMatchConfig, FixMatchModule, FixMatchStudent, train_fixmatch
from pate_stab.student.targets import BottomPolicy, StudentTargets, hard_targets, soft_targets
from pate_stab.student.training import Student, StudentConfig, StudentModule, train_student

__all__ = [
    "AUGMENTATIONS",
    "BottomPolicy",
    "FixMatchConfig",
    "FixMatchModule",
    "FixMatchStudent",
    "Student",
    "StudentConfig",
    "StudentModule",
    "StudentTargets",
    "augmentation_settings",
    "cutout_size",
    "hard_targets",
    "soft_targets",
    "strong_augment",
    "train_fixmatch",
    "train_student",
    "weak_augment",
]
