from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 2

@test_case(points=None, hidden=False)
def test_rpp_of_both_confidences(my_rpp, prediction, target, confidence, vote_margin):
    import numpy as np
    from opcc_edu.metrics import reverse_pair_proportion
    for conf in (confidence, vote_margin):
        assert np.isclose(my_rpp(prediction, target, conf), reverse_pair_proportion(prediction, target, conf))

