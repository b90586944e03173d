"""pate_stab.erm: private convex ERM heads, private hyper-parameter validation, density, inversion.

Papers: Chaudhuri, Monteleoni & Sarwate 2011; Chaudhuri & Vinterbo 2013 (stability-based
validation, Alg 1-5); Wu et al. 2016 (output perturbation and private regression, Alg 1-5; the Functional Mechanism
of Zhang et al. 2012 they compare with);
Ligett et al. 2017 (accuracy-first ERM: CovNR, OutputNR, doubling, Alg 3-5).
"""

from pate_stab.erm.accuracy_first import (
    AccuracyFirstResult,
    cov_nr,
    doubling_method,
    output_nr,
    theory_method,
)
from pate_stab.erm.accuracy_problems import LogisticProblem, RidgeProblem, check_l1_features
from pate_stab.erm.contract import check_features, check_labels, scale_to_unit_ball
from pate_stab.erm.density import (
    PrivateHistogram,
    histogram_score,
    private_histogram,
    private_histogram_density,
)
from pate_stab.erm.functional_mechanism import FunctionalMechanismModel, functional_mechanism
from pate_stab.erm.heads import PrivateLinearHead, public_divisor_lambda
from pate_stab.erm.inversion import inversion_accuracy, invert_attribute
from pate_stab.erm.losses import (
    HingeLoss,
    HuberHingeLoss,
    LogisticLoss,
    Loss,
    RampLoss,
    SquaredLoss,
    get_loss,
)
from pate_stab.erm.objective_perturbation import (
    ObjectivePerturbationBudget,
    objective_perturbation,
    objective_perturbation_budget,
)
from pate_stab.erm.output_perturbation import (
    PrivateLinearModel,
    chaudhuri_output_perturbation,
    output_perturbation,
    output_perturbation_sensitivity,
    rls_out,
)
from pate_stab.erm.solver import SolverResult, erm_objective, solve_erm
from pate_stab.erm.validation import (
    alpha_split,
    control_choice,
    data_split,
    random_choice,
    stability_constants_histogram,
    stability_constants_linear,
    stability_select,
    stability_validate,
    wu_private_tuning,
)
from pate_stab.erm.wu_tuned import wu_tuned_output_perturbation
from pate_stab.privacy.mechanisms.exponential import exponential_mechanism
from pate_stab.privacy.noise.seeded import l2_laplace_vectors

__all__ = [
    "AccuracyFirstResult",
    "LogisticProblem",
    "RidgeProblem",
    "check_l1_features",
    "cov_nr",
    "doubling_method",
    "output_nr",
    "theory_method",
    "HingeLoss",
    "HuberHingeLoss",
    "LogisticLoss",
    "Loss",
    "ObjectivePerturbationBudget",
    "PrivateHistogram",
    "PrivateLinearHead",
    "public_divisor_lambda",
    "PrivateLinearModel",
    "RampLoss",
    "SolverResult",
    "SquaredLoss",
    "alpha_split",
    "chaudhuri_output_perturbation",
    "check_features",
    "check_labels",
    "control_choice",
    "data_split",
    "erm_objective",
    "exponential_mechanism",
    "get_loss",
    "histogram_score",
    "inversion_accuracy",
    "invert_attribute",
    "l2_laplace_vectors",
    "objective_perturbation",
    "objective_perturbation_budget",
    "output_perturbation",
    "output_perturbation_sensitivity",
    "private_histogram",
    "private_histogram_density",
    "random_choice",
    "rls_out",
    "scale_to_unit_ball",
    "solve_erm",
    "stability_constants_histogram",
    "stability_constants_linear",
    "stability_select",
    "stability_validate",
    "wu_private_tuning",
    "wu_tuned_output_perturbation",
    "functional_mechanism",
    "FunctionalMechanismModel",
]
