from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 3

@test_case(points=None, hidden=False)
def test_pci_on_the_given_values(pci, values_a, values_b):
    import numpy as np
    from opcc_edu.confidence import paired_confidence_interval
    prediction, confidence = (np.asarray(x) for x in pci(values_a, values_b))
    expected_prediction, expected_confidence = paired_confidence_interval(values_a, values_b)
    assert prediction.shape == confidence.shape == (len(values_a),)
    assert np.array_equal(prediction, expected_prediction)
    assert np.allclose(confidence, expected_confidence, rtol=0, atol=1e-09)

