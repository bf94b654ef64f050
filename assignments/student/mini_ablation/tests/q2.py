from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 2

@test_case(points=None, hidden=False)
def test_summary_shape(summary, levels):
    import numpy as np
    import pandas as pd
    assert isinstance(summary, pd.DataFrame) and {'level', 'mean', 'half_width'} <= set(summary.columns)
    assert [str(x) for x in summary['level']] == [str(x) for x in levels], 'one row per level, in order'
    half = summary['half_width'].to_numpy(dtype=float)
    assert np.all(np.isfinite(half)) and (half > 0).all(), "every half-width must be finite and positive: a level's seeds must draw different members (ensemble sizes between 2 and M - 1)"

