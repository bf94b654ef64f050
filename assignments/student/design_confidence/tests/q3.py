from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 2

@test_case(points=None, hidden=False)
def test_resolution_on_the_tuning_half(my_confidence, values_a, values_b, target):
    from opcc_edu.classroom.assignments import check_confidence_output
    from opcc_edu.metrics import coverage_resolution
    prediction, confidence = check_confidence_output(my_confidence(values_a.copy(), values_b.copy()), len(target))
    resolution = coverage_resolution(prediction, target, confidence)
    assert resolution >= 0.9, f'CR_10 is {resolution:.1f}: too many ties'

