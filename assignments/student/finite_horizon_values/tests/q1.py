from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 3

@test_case(points=None, hidden=False)
def test_shape_and_one_step(backward_induction, mdp, policy):
    import numpy as np
    values = np.asarray(backward_induction(mdp.transitions, mdp.rewards, policy))
    assert values.shape == (mdp.n_states,), f'expected shape ({mdp.n_states},), got {values.shape}'
    one_step = np.asarray(backward_induction(mdp.transitions, mdp.rewards, policy[:1]))
    expected = mdp.rewards[np.arange(mdp.n_states), policy[0]]
    assert np.allclose(one_step, expected), 'with H = 1 the value is the reward of the first action'

@test_case(points=None, hidden=False)
def test_matches_exact_values(backward_induction, mdp, policy):
    import numpy as np
    from opcc_edu.mdp import policy_value
    got = np.asarray(backward_induction(mdp.transitions, mdp.rewards, policy))
    assert np.allclose(got, policy_value(mdp, policy, len(policy))), 'values differ from the exact values'

