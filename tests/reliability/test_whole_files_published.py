"""Only whole files are published by the runs a sensor starts (docs/architecture.md, the settle rule;
planning/held_inputs.py): the extraction of a dataset never published, which the raw sensor requests, and the
republish of extracted/<key> that the automation sensor requests list raw/<key>/ themselves, after
the sensor's tick. A file that began arriving since (its mtime is now) is left out of that publish
and planned by the sensor once it has settled. A run a person starts publishes what is there, as
before. Real sensor evaluations and real runs on a temp Dagster instance; the file is really being
written (part of its text, mtime now) while the run plans."""

import os
import time

from dagster import AssetSelection

from slm4ie_assets.dagster_layer.assets import extracted_key, partitions_name
from slm4ie_assets.dagster_layer.sensors import evaluate_raw
from support.dagster_project import DagsterProject
from support.files import read_jsonl

WHOLE = "Drugi dokument je napisan do konca.\n"
CUT = "Drugi dokument je nap"  # what a reader sees while the writer is half-way


def settled(path, seconds_ago: int = 3600) -> None:
    then = time.time() - seconds_ago
    os.utime(path, (then, then))


def texts(p: DagsterProject) -> list[str]:
    return [doc["text"] for doc in read_jsonl(p.spec("news").text_path)]


def run_logs(instance, result) -> str:
    return "\n".join(entry.user_message for entry in instance.all_logs(result.run_id))


def test_a_sensor_started_run_leaves_an_arriving_file_out_and_the_next_tick_publishes_it_whole(tmp_path, instance):
    p = DagsterProject(tmp_path, {"news": {"extractor": "text", "domain": "news"}}, settle_seconds=15)
    spec = p.spec("news")
    raw = p.raw("news")
    raw.mkdir(parents=True)
    (raw / "a.txt").write_text("Prvi dokument.\n", encoding="utf-8")
    settled(raw / "a.txt")

    tick = evaluate_raw(spec, p.catalog, instance, None)
    [request] = tick.run_requests
    assert request.asset_selection == [extracted_key("news")]  # never published: one run does it all

    # between the tick and the run, b.txt starts arriving: part of its text, mtime now
    with open(raw / "b.txt", "w", encoding="utf-8") as writer:
        writer.write(CUT)
        writer.flush()
        run = p.materialize(instance, request.asset_selection,
                            tags={**request.tags, "dagster/sensor_name": "raw_news_sensor"})
        assert texts(p) == ["Prvi dokument."]  # b.txt's cut-off text is not published
        assert "1 shard(s) held back, file(s) still arriving (b.txt)" in run_logs(instance, run)
        assert instance.get_dynamic_partitions(partitions_name("news")) == ["a.txt"]

        # the automation sensor's republish while b.txt is still arriving: held back again
        republish = p.materialize(instance, AssetSelection.assets(extracted_key("news")),
                                  tags={"dagster/sensor_name": "slm4ie_republish_sensor",
                                        "dagster/auto_materialize": "true"})
        assert texts(p) == ["Prvi dokument."]
        assert "held back" in run_logs(instance, republish)
        writer.write(WHOLE[len(CUT):])
    settled(raw / "b.txt", 60)  # the writer is done; a minute later the sensor ticks

    tick = evaluate_raw(spec, p.catalog, instance, tick.cursor)
    [request] = tick.run_requests
    assert request.tags["slm4ie/trigger"] == "new" and request.asset_selection == [extracted_key("news")]
    instance.add_dynamic_partitions(partitions_name("news"), ["b.txt"])  # what the daemon does with the tick
    p.materialize(instance, request.asset_selection, tags={**request.tags, "dagster/sensor_name": "raw_news_sensor"})
    assert texts(p) == ["Prvi dokument.", WHOLE.strip()]  # one run extracted b.txt and published


def test_a_run_a_person_starts_plans_every_file_as_before(tmp_path, instance):
    p = DagsterProject(tmp_path, {"news": {"extractor": "text", "domain": "news"}}, settle_seconds=15)
    raw = p.raw("news")
    raw.mkdir(parents=True)
    (raw / "a.txt").write_text("Prvi dokument.\n", encoding="utf-8")
    (raw / "b.txt").write_text(CUT, encoding="utf-8")  # mtime now: a sensor-started run would hold it back
    run = p.publish(instance, "news")  # the UI's Materialize: no sensor tags
    assert texts(p) == ["Prvi dokument.", CUT]
    assert "held back" not in run_logs(instance, run)
