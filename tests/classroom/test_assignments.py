import numpy as np
import pytest

from opcc_edu.classroom.assignments import check_confidence_output, grade_confidence_function, swap_consistency
from opcc_edu.confidence import ensemble_voting, paired_confidence_interval
from opcc_edu.metrics import evaluate


@pytest.fixture()
def ensemble():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(200, 8))
    b = a + rng.normal(0.3, 1.0, size=(200, 8))
    target = (a.mean(1) + rng.normal(0, 0.2, 200) < b.mean(1)).astype(np.int8)
    return a, b, target


def test_grading_matches_the_metrics(ensemble):
    a, b, target = ensemble
    table = grade_confidence_function(paired_confidence_interval, a, b, target, references=("ev",), name="pci again")
    assert list(table.index) == ["EV", "pci again"]
    prediction, confidence = paired_confidence_interval(a, b)
    assert table.loc["pci again", "aurcc"] == pytest.approx(evaluate(prediction, target, confidence)["aurcc"])
    prediction, confidence = ensemble_voting(a, b)
    assert table.loc["EV", "aurcc"] == pytest.approx(evaluate(prediction, target, confidence)["aurcc"])
    assert table.loc["pci again", "swap_consistent"] == 1.0


def test_swap_inconsistent_function_is_reported(ensemble):
    a, b, _ = ensemble

    def lopsided(va, vb):  # confidence depends on side a only
        return (va.mean(1) < vb.mean(1)).astype(int), np.abs(va.mean(1))

    assert swap_consistency(lopsided, a, b) < 0.2


def test_contract_violations_are_explained(ensemble):
    a, b, target = ensemble
    with pytest.raises(ValueError, match="must return a pair"):
        grade_confidence_function(lambda va, vb: va.mean(1), a, b, target)
    with pytest.raises(ValueError, match=r"confidence must have shape \(200,\)"):
        check_confidence_output((np.zeros(200), np.zeros(10)), 200)
    with pytest.raises(ValueError, match="only 0 and 1"):
        check_confidence_output((np.full(200, 2), np.zeros(200)), 200)
    with pytest.raises(ValueError, match="finite"):
        check_confidence_output((np.zeros(200), np.full(200, np.nan)), 200)
    with pytest.raises(ValueError, match="unknown references 'best'"):
        grade_confidence_function(ensemble_voting, a, b, target, references=("best",))
    with pytest.raises(ValueError, match="shape"):
        grade_confidence_function(ensemble_voting, a, b[:, :3], target)
