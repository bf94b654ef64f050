from otter.test_files import test_case

OK_FORMAT = False

name = "q5"
points = 2

@test_case(points=None, hidden=False)
def test_constant_and_random(constant_scores, random_aurcc, loss):
    import numpy as np
    aurcc, rpp, cr_k = (float(x) for x in constant_scores)
    assert np.isclose(aurcc, loss.mean() / 2), "a constant confidence's AURCC is half the full-coverage loss"
    assert rpp == 0 and np.isclose(cr_k, 0.2)
    assert abs(random_aurcc - loss.mean()) < 0.1 * loss.mean(), 'a random confidence scores about the loss'

