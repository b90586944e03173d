import math

import pytest
import torch

from pate_stab._checks import check_delta, check_epsilon, check_int, check_tensor


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, -math.inf])
def test_epsilon_rejects(bad):
    with pytest.raises(ValueError, match="epsilon"):
        check_epsilon(bad)


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.1, math.nan, math.inf])
def test_delta_rejects(bad):
    with pytest.raises(ValueError, match="delta"):
        check_delta(bad)


@pytest.mark.parametrize("bad", ["1", None, True, 1 + 2j])
def test_real_type_errors(bad):
    with pytest.raises(TypeError, match="epsilon"):
        check_epsilon(bad)


def test_int_checks():
    assert check_int("m", 3, minimum=1) == 3
    with pytest.raises(TypeError, match="m"):
        check_int("m", 3.0)
    with pytest.raises(TypeError, match="m"):
        check_int("m", True)
    with pytest.raises(ValueError, match="m"):
        check_int("m", 0, minimum=1)


def test_tensor_checks():
    with pytest.raises(ValueError, match="x"):
        check_tensor("x", torch.tensor([1.0, math.nan]))
    with pytest.raises(ValueError, match="x"):
        check_tensor("x", torch.zeros(2, 2), ndim=1)
    with pytest.raises(ValueError, match="x"):
        check_tensor("x", torch.zeros(0))
    with pytest.raises(TypeError, match="x"):
        check_tensor("x", torch.zeros(3), floating=False)
