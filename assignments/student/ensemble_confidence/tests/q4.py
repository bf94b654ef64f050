from otter.test_files import test_case

OK_FORMAT = False

name = "q4"
points = 2

@test_case(points=None, hidden=False)
def test_symmetry_has_the_three_answers(symmetric):
    assert set(symmetric) == {'EV', 'PCI', 'U-PCI'}, 'one entry per confidence function'
    assert all((isinstance(value, bool) for value in symmetric.values())), 'True or False each'

