from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 2

@test_case(points=None, hidden=False)
def test_upci_on_the_given_values(upci, pci, values_a, values_b):
    import numpy as np
    from opcc_edu.confidence import unpaired_confidence_interval
    prediction, confidence = (np.asarray(x) for x in upci(values_a, values_b))
    expected_prediction, expected_confidence = unpaired_confidence_interval(values_a, values_b)
    assert np.array_equal(prediction, expected_prediction)
    assert np.allclose(confidence, expected_confidence, rtol=0, atol=1e-09)

