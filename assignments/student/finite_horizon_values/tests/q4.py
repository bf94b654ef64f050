from otter.test_files import test_case

OK_FORMAT = False

name = "q4"
points = 2

@test_case(points=None, hidden=False)
def test_the_example_query(answer_query, mdp, query):
    from opcc_edu.mdp import q_value
    q = q_value(mdp, query['policy_a'], len(query['policy_a']))
    assert answer_query(mdp.transitions, mdp.rewards, query) == int(q[1, 0] < q[1, 1])

