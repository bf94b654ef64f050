from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 2

@test_case(points=None, hidden=False)
def test_baseline_gains(baseline_gains, values_a, values_b, target):
    import numpy as np
    from opcc_edu.classroom.assignments import baseline_selective_gains
    expected = baseline_selective_gains(values_a, values_b, target)
    assert set(baseline_gains) == set(expected), f'keys must be {sorted(expected)}'
    for label, gain in expected.items():
        assert np.isclose(baseline_gains[label], gain), f'{label}: expected {gain:.4f}'

