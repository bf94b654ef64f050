from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 2

@test_case(points=None, hidden=False)
def test_baseline_gains(baseline_gains, values_a, values_b, target):
    import numpy as np
    from opcc_edu.confidence import ensemble_voting, paired_confidence_interval, unpaired_confidence_interval
    from opcc_edu.metrics import selective_gain
    baselines = {'EV': ensemble_voting, 'PCI': paired_confidence_interval, 'U-PCI': unpaired_confidence_interval}
    assert isinstance(baseline_gains, dict) and set(baseline_gains) == set(baselines), 'keys must be EV, PCI, U-PCI'
    for label, fn in baselines.items():
        prediction, confidence = fn(values_a, values_b)
        right = np.isclose(float(baseline_gains[label]), selective_gain(prediction, target, confidence))
        assert right, f'{label}: not its selective gain on the tuning half'

