from otter.test_files import test_case

OK_FORMAT = False

name = "q4"
points = 2

@test_case(points=None, hidden=False)
def test_symmetry_of_the_three(symmetric):
    assert symmetric == {'EV': False, 'PCI': True, 'U-PCI': True}, 'PCI and U-PCI are symmetric; EV is not when members tie (a tie votes 0 in both orders)'

