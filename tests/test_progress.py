import io

from folio.nodes.backends.progress import BarProgress, NullProgress, progress_for


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_bar_when_not_a_terminal_or_quiet():
    assert type(progress_for(False, io.StringIO())) is NullProgress
    assert type(progress_for(True, _Tty())) is NullProgress


def test_bar_on_a_terminal_counts_done_out_of_total():
    bar = progress_for(False, _Tty())
    assert isinstance(bar, BarProgress)
    bar.add_total(10)
    bar.advance(4)
    assert (bar._bar.n, bar._bar.total) == (4, 10)
    assert "4/10" in str(bar._bar) and "<" in str(bar._bar)  # done/total and elapsed<remaining (ETA)
    bar.close()


def test_bar_draws_nothing_until_used():
    bar = BarProgress()
    bar.close()
    assert bar._bar is None


def test_bar_never_passes_its_total_when_rounded_shares_add_up_to_more(recwarn):
    bar = progress_for(False, _Tty())
    bar.add_total(round(2.4))  # what a book announces: its windows' shares, rounded
    bar.advance(1.2)
    bar.advance(1.2)
    assert bar._bar.n <= bar._bar.total and "100%" in str(bar._bar)
    assert not [w for w in recwarn if "clamping frac" in str(w.message)]
    bar.close()
