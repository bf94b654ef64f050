from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 2

@test_case(points=None, hidden=False)
def test_verdict_is_a_choice(verdict):
    assert verdict in ('better', 'worse', 'not separated'), f'unknown verdict {verdict!r}'

