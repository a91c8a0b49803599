"""The rule that tells a changed log from the one a stored offset was taken from (sparklog.log_changes)."""
from sparklog.log_changes import find_changes, resume_offsets

TP0, TP1 = ("t", 0), ("t", 1)


def test_an_unchanged_log_has_no_change():
    assert find_changes({TP0: 5}, {"t": "A"}, {"t": "A"}, {TP0: 0}, {TP0: 9}) == []
    assert find_changes({TP0: 9}, {}, {}, {TP0: 0}, {TP0: 9}) == [], "at the end exactly is fine"


def test_a_new_topic_id_is_a_recreated_topic_even_when_its_offsets_look_fine():
    [c] = find_changes({TP0: 5}, {"t": "A"}, {"t": "B"}, {TP0: 0}, {TP0: 50})
    assert (c.kind, c.stored, c.resume_at) == ("recreated", 5, 0)
    assert "Topic t was re-created (topic id A is now B)" in c.describe() and "offset 5" in c.describe()


def test_without_ids_an_offset_beyond_the_end_is_a_reset_and_below_the_start_aged_out():
    changes = find_changes({TP0: 50, TP1: 2}, {}, {}, {TP0: 0, TP1: 7}, {TP0: 10, TP1: 20})
    assert [(c.tp, c.kind) for c in changes] == [(TP0, "offset-reset"), (TP1, "aged-out")]
    assert "offset was changed from 50 to 10" in changes[0].describe()
    assert resume_offsets({TP0: 50, TP1: 2}, changes) == {TP0: 0, TP1: 7}


def test_a_missing_partition_is_gone_and_dropped_and_unresolved_offsets_are_not_checked():
    changes = find_changes({TP0: 5, TP1: -2}, {}, {}, {}, {})
    assert [(c.tp, c.kind) for c in changes] == [(TP0, "gone")]
    assert resume_offsets({TP0: 5, TP1: -2}, changes) == {TP1: -2}
