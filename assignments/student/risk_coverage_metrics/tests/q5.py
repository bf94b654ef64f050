from otter.test_files import test_case

OK_FORMAT = False

name = "q5"
points = 2

@test_case(points=None, hidden=False)
def test_constant_and_random(constant_scores, random_aurcc, prediction, target):
    import numpy as np
    from opcc_edu.metrics import aurcc, coverage_resolution, reverse_pair_proportion
    constant = np.ones(len(target))
    expected = [f(prediction, target, constant) for f in (aurcc, reverse_pair_proportion, coverage_resolution)]
    assert len(constant_scores) == 3, 'constant_scores holds three numbers: (aurcc, rpp, cr_k)'
    got = [float(x) for x in constant_scores]
    assert np.allclose(got, expected), 'constant_scores is not (AURCC, RPP, CR_K) of np.ones(200) on these answers'
    assert 0.0 <= float(random_aurcc) <= 1.0, 'random_aurcc is a mean AURCC: a number between 0 and 1'

