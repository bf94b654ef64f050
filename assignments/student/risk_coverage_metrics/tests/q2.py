from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 2

@test_case(points=None, hidden=False)
def test_aurcc_of_both_confidences(my_aurcc, prediction, target, confidence, vote_margin):
    import numpy as np
    from opcc_edu.metrics import aurcc
    for conf in (confidence, vote_margin):
        assert np.isclose(my_aurcc(prediction, target, conf), aurcc(prediction, target, conf))

