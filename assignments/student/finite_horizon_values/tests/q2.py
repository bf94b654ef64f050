from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 2

@test_case(points=None, hidden=False)
def test_close_to_exact(monte_carlo_value, mdp, policy):
    import numpy as np
    from opcc_edu.mdp import policy_value
    exact = policy_value(mdp, policy, len(policy))[0]
    mean, standard_error = monte_carlo_value(mdp.transitions, mdp.rewards, policy, 0, 4000, seed=1)
    assert np.isfinite(mean) and 0 < standard_error < 0.2, f'standard error {standard_error} is implausible'
    assert abs(mean - exact) < 5 * standard_error, f'estimate {mean} is far from the exact value {exact}'

