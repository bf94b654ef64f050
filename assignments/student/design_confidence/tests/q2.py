from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 4

@test_case(points=None, hidden=False)
def test_valid_and_beats_voting_on_the_tuning_half(my_confidence, values_a, values_b, target):
    from opcc_edu.classroom.assignments import check_confidence_output
    from opcc_edu.confidence import ensemble_voting
    from opcc_edu.metrics import selective_gain
    prediction, confidence = check_confidence_output(my_confidence(values_a.copy(), values_b.copy()), len(target))
    gain = selective_gain(prediction, target, confidence)
    ev_prediction, ev_confidence = ensemble_voting(values_a, values_b)
    ev_gain = selective_gain(ev_prediction, target, ev_confidence)
    assert gain > ev_gain, f"selective gain {gain:.3f} does not beat ensemble voting's on the tuning half"

