from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 3

@test_case(points=None, hidden=False)
def test_results_table_shape(results, factor):
    import pandas as pd
    assert isinstance(results, pd.DataFrame), 'results must be a pandas DataFrame'
    required = {'factor', 'level', 'seed', 'aurcc', 'selective_gain', 'cr_k'}
    assert required <= set(results.columns), f'missing columns: {sorted(required - set(results.columns))}'
    assert factor in ('ensemble_size', 'confidence') and set(results['factor']) == {factor}
    per_level = results.groupby(results['level'].astype(str))['seed'].nunique()
    assert len(per_level) >= 2, 'at least two levels'
    assert (per_level >= 3).all(), 'at least three seeds per level'
    assert not results.duplicated(['level', 'seed']).any(), 'one row per (level, seed)'
    assert results['aurcc'].between(0, 1).all() and results['cr_k'].between(0, 1).all()

