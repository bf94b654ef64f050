from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 2

@test_case(points=None, hidden=False)
def test_points_of_both_confidences(risk_coverage_points, prediction, target, confidence, vote_margin):
    import numpy as np
    from opcc_edu.metrics import risk_coverage_curve
    for conf in (confidence, vote_margin):
        coverage, risk = (np.asarray(x, dtype=float) for x in risk_coverage_points(prediction, target, conf))
        expected_coverage, expected_risk, _ = risk_coverage_curve(prediction, target, conf)
        assert coverage.size and coverage[0] == 0 and (risk[0] == 0), 'the first point is the zero-coverage anchor (0, 0)'
        assert coverage.shape == expected_coverage.shape, f'expected {expected_coverage.size} points'
        assert np.allclose(coverage, expected_coverage) and np.allclose(risk, expected_risk)

