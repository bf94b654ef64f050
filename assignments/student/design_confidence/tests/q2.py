from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 4

@test_case(points=None, hidden=False)
def test_valid_and_beats_voting_on_the_tuning_half(my_confidence, values_a, values_b, target):
    from opcc_edu.classroom.assignments import baseline_selective_gains, check_confidence_output
    from opcc_edu.metrics import selective_gain
    prediction, confidence = check_confidence_output(my_confidence(values_a.copy(), values_b.copy()), len(target))
    gain = selective_gain(prediction, target, confidence)
    ev_gain = baseline_selective_gains(values_a, values_b, target)['EV']
    assert gain > ev_gain, f"selective gain {gain:.3f} does not beat ensemble voting's {ev_gain:.3f}"

