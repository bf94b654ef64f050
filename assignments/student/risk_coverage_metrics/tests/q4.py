from otter.test_files import test_case

OK_FORMAT = False

name = "q4"
points = 2

@test_case(points=None, hidden=False)
def test_cr_k_of_both_confidences(my_cr_k, prediction, target, confidence, vote_margin):
    import numpy as np
    from opcc_edu.metrics import coverage_resolution
    for conf in (confidence, vote_margin):
        assert np.isclose(my_cr_k(prediction, target, conf), coverage_resolution(prediction, target, conf))

