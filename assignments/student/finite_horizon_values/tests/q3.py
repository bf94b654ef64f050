from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 2

@test_case(points=None, hidden=False)
def test_error_falls_like_one_over_root_n(rmse, slope):
    import numpy as np
    rmse = np.asarray(rmse, dtype=float)
    assert rmse.shape == (3,), f'rmse must have shape (3,), got {rmse.shape}'
    assert np.all(np.diff(rmse) < 0), 'the error must fall as the number of rollouts grows'
    assert -0.8 < float(slope) < -0.2, f'slope {slope} is far from -1/2'

