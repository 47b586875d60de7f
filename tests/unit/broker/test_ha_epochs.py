"""Where a replica joining a master cuts its CommitLog, from the two term lists."""

from skiff.broker.ha.epochs import EpochFile, truncation_point


def test_a_demoted_master_cuts_what_it_wrote_after_its_successor_took_over():
    assert truncation_point([(1, 0)], [(1, 0), (2, 900)], 1000) == 900


def test_a_slave_behind_the_new_master_keeps_everything():
    assert truncation_point([(1, 0)], [(1, 0), (2, 900)], 800) == 800


def test_a_replica_that_missed_a_term_cuts_at_the_first_term_it_lacks():
    assert truncation_point([(1, 0)], [(1, 0), (2, 900), (3, 1500)], 1200) == 900


def test_the_newest_common_term_decides():
    local = [(1, 0), (2, 900), (4, 2000)]  # it was master of epoch 4 that the group never kept
    remote = [(1, 0), (2, 900), (3, 1800)]
    assert truncation_point(local, remote, 2500) == 1800


def test_a_term_with_another_start_is_not_common():
    assert truncation_point([(1, 0), (2, 950)], [(1, 0), (2, 900)], 1200) == 900


def test_no_history_keeps_the_data():
    assert truncation_point([], [(1, 0), (2, 900)], 1200) == 1200


def test_the_file_round_trips(tmp_path):
    f = EpochFile(str(tmp_path))
    assert f.load() == []
    f.save([(1, 0), (2, 4096)])
    assert EpochFile(str(tmp_path)).load() == [(1, 0), (2, 4096)]
