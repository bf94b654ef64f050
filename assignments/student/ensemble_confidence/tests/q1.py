from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 2

@test_case(points=None, hidden=False)
def test_ev_on_the_given_values(ev, values_a, values_b):
    import numpy as np
    from opcc_edu.confidence import ensemble_voting
    prediction, confidence = (np.asarray(x) for x in ev(values_a, values_b))
    expected_prediction, expected_confidence = ensemble_voting(values_a, values_b)
    assert prediction.shape == confidence.shape == (len(values_a),)
    assert np.array_equal(prediction, expected_prediction) and np.allclose(confidence, expected_confidence)

