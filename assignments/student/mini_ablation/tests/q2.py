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
    assert np.all(np.isfinite(summary['half_width'])) and (summary['half_width'] > 0).all()

