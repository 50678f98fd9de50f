"""The K12 genus-6 topology table: validity, canonical forms, indices, and (slow) regeneration."""
import json
import os
import random
from pathlib import Path

import numpy as np
import pytest

from szrank.geometry import topology
from szrank.geometry.topology import (LEX_TOPOLOGIES, PAPER_RELABELLINGS, STAR_CYCLE, TOPOLOGIES, TOPOLOGY_COUNT,
                             candidate_relabellings, canonical_form, canonical_relabelling, check_topology,
                             index_from_lex, lex_index, normalise, read_public_topologies,
                             enumerate_labelled, link_orders, load_topologies, orient, read_triangulation,
                             surface_summary, topology_index, topology_links)

FIXTURE = Path(__file__).resolve().parent / "data" / "szilassi" / "k12_genus6_triangulation.txt"
SLOW = os.environ.get("SZRANK_SLOW") == "1"     # the full enumeration takes minutes in pure Python


def relabel(facets, permutation):
    return [tuple(permutation[v] for v in t) for t in facets]


def random_relabelling(rng):
    images = list(range(1, 13))
    rng.shuffle(images)
    return dict(zip(range(1, 13), images))


def test_table_has_59_valid_canonical_distinct_sorted_entries():
    assert TOPOLOGY_COUNT == 59 and len(TOPOLOGIES) == 59
    assert list(LEX_TOPOLOGIES) == sorted(set(TOPOLOGIES))
    assert [LEX_TOPOLOGIES[lex_index(i)] for i in range(59)] == list(TOPOLOGIES)
    for facets in TOPOLOGIES:
        assert len(facets) == 44 and all(t == tuple(sorted(t)) for t in facets)
        summary = surface_summary(facets)
        assert summary == dict(vertices=12, edges=66, triangles=44, euler=-10, orientable=True, genus=6,
                               neighbourly=True)
        assert all(len(link) == 11 for link in link_orders(facets))
        assert canonical_form(facets) == facets


def test_fixture_is_in_the_table_under_any_labelling():
    fixture = check_topology(read_triangulation(FIXTURE))
    index = topology_index(fixture)
    assert TOPOLOGIES[index] == canonical_form(fixture)
    rng = random.Random(3)
    for _ in range(5):
        assert topology_index(relabel(fixture, random_relabelling(rng))) == index
    # orientation reversal is a relabelling of the unoriented facets too: reversing each triangle
    assert topology_index([tuple(reversed(t)) for t in fixture]) == index


def test_canonical_form_beats_random_relabellings():
    rng = random.Random(11)
    for index in (0, 29, 58):
        facets = TOPOLOGIES[index]
        for _ in range(30):
            other = tuple(sorted(tuple(sorted(t)) for t in relabel(facets, random_relabelling(rng))))
            assert other >= facets
            assert canonical_form(other) == facets


def test_link_orders_are_coherent_cycles():
    for index in (0, 47):
        facets = TOPOLOGIES[index]
        orders = topology_links(index)
        triples = set(facets)
        for v, order in enumerate(orders, 1):
            assert sorted(order) == [u for u in range(1, 13) if u != v] and order[0] == min(order)
            for k in range(11):
                assert tuple(sorted((v, order[k], order[(k + 1) % 11]))) in triples
        # coherent: every edge {v, w} is traversed v->w in one triangle and w->v in the other
        oriented = set()
        for v, order in enumerate(orders, 1):
            for k in range(11):
                a, b = order[k], order[(k + 1) % 11]
                oriented.add(min(((v, a, b), (a, b, v), (b, v, a))))
        assert len(oriented) == 44


def test_checker_rejects_bad_inputs_with_clear_messages(tmp_path):
    facets = list(TOPOLOGIES[0])
    with pytest.raises(ValueError, match="expected 44 triangles"):
        check_topology(facets[:-1])
    with pytest.raises(ValueError, match="occurs twice"):
        check_topology(facets[:-1] + [facets[0]])
    a, b = facets[0], next(t for t in facets[1:] if len(set(t) & set(facets[0])) == 2)   # share an edge
    x, y = sorted(set(a) & set(b))
    c, d = (set(a) - {x, y}).pop(), (set(b) - {x, y}).pop()
    flipped = [t for t in facets if t not in (a, b)] + [(x, c, d), (y, c, d)]           # edge flip: cd now in 4
    with pytest.raises(ValueError, match=r"edge \(\d+, \d+\) lies in 4 triangles"):
        check_topology(flipped)
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2 3\n1 2\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: expected three vertex numbers"):
        read_triangulation(bad)


def test_small_surfaces_orientability():
    rp2 = [(1, 2, 3), (1, 3, 4), (1, 4, 5), (1, 5, 6), (1, 6, 2), (2, 3, 5), (3, 4, 6), (4, 5, 2), (5, 6, 3), (6, 2, 4)]
    torus = [(i % 7 + 1, (i + 1) % 7 + 1, (i + 3) % 7 + 1) for i in range(7)] + \
            [(i % 7 + 1, (i + 2) % 7 + 1, (i + 3) % 7 + 1) for i in range(7)]
    assert orient(rp2) is None and surface_summary(rp2)["euler"] == 1
    assert orient(torus) is not None and surface_summary(torus)["genus"] == 1


def test_enumerator_first_solutions_are_valid_with_fixed_star():
    found = []
    nodes = enumerate_labelled(lambda t: found.append(t) or len(found) >= 20)
    assert len(found) == 20 and nodes > 20
    star = {tuple(sorted((1, STAR_CYCLE[k], STAR_CYCLE[(k + 1) % 11]))) for k in range(11)}
    for oriented in found:
        facets = check_topology(oriented)
        assert star <= set(facets)
        assert orient(oriented) is not None
        assert canonical_form(facets) in set(TOPOLOGIES)


def test_damaged_table_is_a_clear_error(tmp_path):
    path = tmp_path / "topologies.json"
    payload = json.loads(topology.DATA_PATH.read_text())
    payload["topologies"] = payload["topologies"][:-1]
    path.write_text(json.dumps(payload))
    with pytest.raises(ValueError, match="expected 59 topologies"):
        load_topologies(path)
    with pytest.raises(FileNotFoundError, match="write_topologies"):
        load_topologies(tmp_path / "missing.json")


@pytest.mark.skipif(not SLOW, reason="full enumeration takes minutes; set SZRANK_SLOW=1")
def test_regenerated_table_matches_the_shipped_one(tmp_path):
    table = topology.write_topologies(tmp_path / "topologies.json", show_progress=False)
    assert len(table) == 59
    assert table == TOPOLOGIES
    assert load_topologies(tmp_path / "topologies.json") == LEX_TOPOLOGIES


PUBLISHED = Path(__file__).resolve().parent / "data" / "szilassi"


def test_index_agrees_with_the_published_numbering():
    """Surface #30 of Lutz's lexicographic list (numbered from 1) is lexicographic entry 29, as given.

    The published list holds each type by its lexicographically minimal facet list, in lexicographic
    order, so the entry must already be canonical and sit at the same position in LEX_TOPOLOGIES."""
    facets = check_topology(read_triangulation(PUBLISHED / "lutz_manifolds_lex_d2_n12_o1_g6_surface30.txt"))
    assert canonical_form(facets) == facets
    assert LEX_TOPOLOGIES[29] == facets
    assert lex_index(topology_index(facets)) == 29 and index_from_lex(29) == topology_index(facets)


def test_the_vertex_transitive_triangulation_is_in_the_table():
    "Benedetti & Lutz's d2n12g6 (unique vertex-transitive one): a valid entry under its own labelling."
    facets = check_topology(read_triangulation(PUBLISHED / "benedetti_lutz_d2n12g6.txt"))
    index = topology_index(facets)
    assert TOPOLOGIES[index] == canonical_form(facets)
    # vertex-transitive: from every vertex's star some relabelling (vertex -> 1, its link onto
    # STAR_CYCLE; neighbourly, so that fixes every label) reaches the canonical form
    canonical = canonical_form(facets)
    reaching = {int(np.flatnonzero(row == 1)[0]) for row in candidate_relabellings(facets)
                if normalise(relabel(facets, row)) == canonical}
    assert reaching == set(range(1, 13))


PUBLIC_LIST = Path(__file__).resolve().parent / "data" / "szilassi" / "public_solver" / "topologies.txt"


def test_every_public_line_is_its_own_index():
    "Line i of the public list (the paper's #i+1) is TOPOLOGIES[i], reached by PAPER_RELABELLINGS[i]."
    public = read_public_topologies(PUBLIC_LIST)
    assert len(public) == 59
    for i, line in enumerate(public):
        assert topology_index(line) == i
        images = PAPER_RELABELLINGS[i]
        assert normalise([tuple(images[v - 1] for v in t) for t in line]) == TOPOLOGIES[i]
        assert canonical_relabelling(line) == images
    # the Razorcross, the public solver's "topology 42", is the paper's #43
    assert topology_index(public[42]) == 42


def test_public_list_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "topologies.txt"
    bad.write_text("no.01 01a 01b\n")
    with pytest.raises(ValueError, match=r"topologies.txt:1: expected 'no.NN' and 44 triangles"):
        read_public_topologies(bad)


def test_an_old_v1_table_is_refused_with_what_to_do(tmp_path):
    payload = json.loads(topology.DATA_PATH.read_text())
    payload["format"] = "szrank-topologies-v1"
    path = tmp_path / "topologies.json"
    path.write_text(json.dumps(payload))
    with pytest.raises(ValueError, match="write_topologies"):
        load_topologies(path)
    payload["format"] = topology.DATA_FORMAT
    payload["paper_order"] = payload["paper_order"][:-1]
    path.write_text(json.dumps(payload))
    with pytest.raises(ValueError, match="paper_order"):
        load_topologies(path)
