"""A raw-folder sensor ticked like the daemon ticks it, and the republish automation sensor."""

from dagster import (
    AddDynamicPartitionsRequest,
    DeleteDynamicPartitionsRequest,
    build_sensor_context,
    evaluate_automation_conditions,
)

from slm4ie_assets.dagster_layer.assets import extracted_key, partitions_name
from support.dagster_project import DagsterProject


class Watcher:
    """Ticks the dataset's sensor like the daemon: evaluate, then apply the partition requests."""

    def __init__(self, project: DagsterProject, instance, key: str = "kas"):
        self.project, self.instance, self.key = project, instance, key
        self.sensor = project.defs.get_sensor_def(f"raw_{key}_sensor")
        self.cursor = None
        self.auto_cursor = None

    def tick(self):
        data = self.sensor.evaluate_tick(build_sensor_context(instance_ref=self.instance.get_ref(), cursor=self.cursor,
                                                              definitions=self.project.defs))
        for req in data.dynamic_partitions_requests or []:
            if isinstance(req, AddDynamicPartitionsRequest):
                self.instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
            else:
                assert isinstance(req, DeleteDynamicPartitionsRequest)
                for k in req.partition_keys:
                    self.instance.delete_dynamic_partition(req.partitions_def_name, k)
        self.cursor = data.cursor
        return data

    def partitions(self) -> list[str]:
        return self.instance.get_dynamic_partitions(partitions_name(self.key))

    def run(self, data, **kw):
        return [self.project.execute(self.instance, r, **kw) for r in data.run_requests]

    def automation(self) -> list:
        """What the republish automation sensor would request now."""
        res = evaluate_automation_conditions(self.project.defs, self.instance, cursor=self.auto_cursor)
        self.auto_cursor = res.cursor
        return [s.key for s in res._requested_subsets]

    def republish_if_requested(self):
        requested = self.automation()
        assert extracted_key(self.key) in requested, requested
        return self.project.publish(self.instance, self.key)
