"""The raw sensor of a dataset whose raw folder is in a bucket (dagster_layer/bucket_sensor.py,
planning/bucket_listing.py; docs/architecture.md "The asset graph"): a tick lists the prefix once and
downloads nothing; settled changes since the local mirror become ONE run of extracted/<key>, which
mirrors, extracts and publishes. Against the local S3 server (tests/support/s3.py), on a real
sqlite instance, ticked with `build_sensor_context` as the daemon ticks it."""

import os

from slm4ie_assets.dagster_layer.assets import extracted_key
from slm4ie_assets.dagster_layer.sensor_cursor import RawCursor
from slm4ie_assets.definitions import warn_missing_raw_folders
from support.dagster_project import DagsterProject
from support.watcher import Watcher

TEXTS = {"a.txt": "prvi a\n\ndrugi a\n", "b.txt": "prvi b\n", "sub/c.txt": "prvi c\n\ndrugi c\n"}
KAS = {"kas": {"extractor": "text", "domain": "academic"}}


def put(bucket, files: dict[str, str], prefix: str = "raw/kas/") -> None:
    for name, text in files.items():
        bucket.client.put_object(Bucket=bucket.name, Key=prefix + name, Body=text.encode("utf-8"))


def remove(bucket, name: str, prefix: str = "raw/kas/") -> None:
    bucket.client.delete_object(Bucket=bucket.name, Key=prefix + name)


def in_bucket(tmp_path, bucket, datasets=KAS, **top) -> DagsterProject:
    return DagsterProject(tmp_path, datasets, input_dir=f"{bucket.url}/raw", work_dir="work", **top)


def local_copy(project: DagsterProject, key: str = "kas") -> dict[str, tuple[int, int, int]]:
    """(size, mtime, inode) of every file of the mirror and of its state: what a download would change."""
    spec = project.spec(key)
    found = {}
    for path in [spec.mirror_state, *(sorted(spec.raw_dir.rglob("*")) if spec.raw_dir.exists() else [])]:
        if path.exists():
            st = os.stat(path)
            found[str(path)] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return found


def verdict(data) -> str:
    return RawCursor.decode(data.cursor).last_tick


def test_changes_in_the_bucket_are_one_run_each_and_a_tick_downloads_nothing(tmp_path, s3_bucket, instance):
    put(s3_bucket, TEXTS)
    project = in_bucket(tmp_path, s3_bucket)
    spec = project.spec("kas")
    w = Watcher(project, instance)

    # the first tick, before any run made the mirror: one run, and not a byte copied
    data = w.tick()
    (req,) = data.run_requests
    assert req.asset_selection == [extracted_key("kas")]
    assert req.tags["slm4ie/dataset"] == "kas" and req.tags["slm4ie/trigger"] == "initial"
    assert req.run_key.startswith("initial@") and req.run_key.endswith("#1")
    assert "3 new (a.txt, b.txt, sub/c.txt): requested one run of extracted/kas" in verdict(data)
    assert not spec.raw_dir.exists() and not spec.mirror_state.exists()
    again = w.tick()  # a tick never requests the same work twice
    assert again.run_requests == [] and "requested already" in again.skip_message
    w.run(data)
    assert b"prvi c" in project.published("kas")[0]

    # unchanged: a skip that says so
    idle = w.tick()
    assert idle.run_requests == []
    assert idle.skip_message == f"kas: 3 object(s) in {s3_bucket.url}/raw/kas, as the local mirror holds them: " \
        "nothing to request"

    # an object added and one removed: one run; the tick leaves the mirror as it was
    before = local_copy(project)
    put(s3_bucket, {"b2.txt": "nov dokument\n"})
    remove(s3_bucket, "b.txt")
    data = w.tick()
    (req,) = data.run_requests
    assert req.tags["slm4ie/trigger"] == "new+deleted" and req.run_key.endswith("#2")
    assert "1 new (b2.txt); 1 removed (b.txt): requested one run of extracted/kas" in verdict(data)
    assert local_copy(project) == before
    assert w.tick().run_requests == []
    w.run(data)
    published = project.published("kas")
    assert b"nov dokument" in published[0] and b"prvi b" not in published[0]
    assert published == project.fresh("kas")
    assert w.tick().run_requests == []


def test_objects_still_changing_are_held_until_the_listing_holds_still(tmp_path, s3_bucket, instance):
    put(s3_bucket, TEXTS)
    project = in_bucket(tmp_path, s3_bucket, settle_seconds=3600, max_settle_wait=3600)
    w = Watcher(project, instance)
    first = w.tick()  # written just now, never listed before
    assert first.run_requests == []
    assert "3 object(s) in" in first.skip_message and "still arriving (a.txt, b.txt, sub/c.txt)" in first.skip_message
    assert len(w.tick().run_requests) == 1  # unchanged since the previous tick: settled

    # a producer still writing: a new object that changes between ticks waits for the listing to hold still
    put(s3_bucket, {"d.txt": "prvi del\n"})
    held = w.tick()
    assert held.run_requests == [] and "1 object(s)" in held.skip_message and "(d.txt)" in held.skip_message
    put(s3_bucket, {"d.txt": "prvi del\ndrugi del\n"})
    assert w.tick().run_requests == []
    put(s3_bucket, {"e.txt.part": "x"})  # a copy tool's name: held back by the same rule, never an input
    assert "(e.txt.part)" in w.tick().skip_message
    data = w.tick()
    (req,) = data.run_requests
    assert "4 new (a.txt, b.txt, d.txt and 1 more)" in verdict(data)  # the mirror still has nothing
    assert w.tick().run_requests == []
    assert not project.spec("kas").raw_dir.exists()


def test_check_defs_warns_for_an_empty_prefix_not_for_a_bucket_not_mirrored_yet(tmp_path, s3_bucket, capsys):
    put(s3_bucket, TEXTS)
    project = in_bucket(tmp_path, s3_bucket, datasets={**KAS, "nov": {"extractor": "text", "domain": "d"}})
    assert not project.spec("kas").raw_dir.exists()
    (line,) = warn_missing_raw_folders(project.catalog)
    assert line.startswith(f"Warning: dataset 'nov': raw prefix {s3_bucket.url}/raw/nov holds no object"), line
    assert capsys.readouterr().err == line + "\n"


def test_a_bucket_that_cannot_be_listed_skips_the_tick_naming_it(tmp_path, s3_bucket, instance):
    project = DagsterProject(tmp_path, KAS, input_dir="s3://slm4ie-no-such-bucket/raw", work_dir="work")
    data = Watcher(project, instance).tick()
    assert data.run_requests == []
    assert data.skip_message.startswith("kas: cannot list s3://slm4ie-no-such-bucket/raw/kas: "), data.skip_message
