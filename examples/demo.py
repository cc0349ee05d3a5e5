"""`make demo`: materialize every dataset of the bundled sample corpus through the Dagster CLI,
then say where the outputs are and how to look at them in the UI."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "examples" / "extract.yaml"


def main() -> int:
    env = dict(os.environ, SLM4IE_EXTRACT_CONFIG=str(CONFIG))
    env.pop("DAGSTER_HOME", None)  # the root dagster.yaml keeps the run history under .dagster/
    dagster = Path(sys.executable).parent / "dagster"
    cmd = [str(dagster), "asset", "materialize", "--select", "key:extracted/*"]
    # quoted as a shell needs it: zsh expands an unquoted `key:extracted/*` and fails
    print("$ SLM4IE_EXTRACT_CONFIG=examples/extract.yaml", shlex.join(["dagster", *cmd[1:]]), flush=True)
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        sys.stdout.write(res.stdout[-4000:])
        sys.stderr.write(res.stderr[-8000:])
        print("\ndemo: the run failed (log above)", file=sys.stderr)
        return res.returncode
    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.store.dataset_store import DatasetStore

    catalog = load_catalog(CONFIG)
    print(f"\nPublished under {catalog.output_dir.relative_to(ROOT)}/:")
    for spec in catalog.datasets.values():
        manifest = DatasetStore(spec).published_manifest()
        side = f" + {spec.sidecar_path.name}" if manifest and manifest.has_sidecar else ""
        drops = sum(manifest.drops.values()) if manifest else 0
        print(f"  {spec.text_path.name:<28} {manifest.docs if manifest else 0:>3} documents{side}"
              + (f"  ({drops} skipped, see the drop ledger)" if drops else ""))
    first = catalog.dataset("web_jsonl").text_path
    print(f"\nFirst line of {first.relative_to(ROOT)}:\n  {first.read_text(encoding='utf-8').splitlines()[0]}")
    print("\nOpen the UI on the sample corpus:  make demo-ui   (then http://127.0.0.1:3000)")
    print("Look at the documents:             SLM4IE_EXTRACT_CONFIG=examples/extract.yaml .venv/bin/slm4ie inspect "
          "web_jsonl --annotated")
    print("Re-extract from the CLI:           SLM4IE_EXTRACT_CONFIG=examples/extract.yaml .venv/bin/dg launch "
          "--assets extracted/news_txt --config-json "
          + shlex.quote(json.dumps({"resources": {"extract": {"config": {"force": True}}}})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
