"""Grafana dashboard JSON, built from small typed pieces (schemaVersion of @grafana/schema 13.x).

Only what the dashboards here use: time series, heatmaps and stats laid out in rows on the
24-column grid, a Prometheus data-source variable and query variables. Every panel must carry a
description; ``Layout`` assigns ids and grid positions so the JSON stays stable between runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 42  # @grafana/schema 13.2.3 defaultDashboard.schemaVersion
GRID_COLUMNS = 24
PANEL_HEIGHT = 8
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Query:
    """One PromQL target; ``legend`` is Grafana's legendFormat."""

    expr: str
    legend: str


@dataclass(frozen=True, slots=True)
class Panel:
    """A panel before layout: kind, text, queries and display options."""

    kind: str  # "timeseries", "heatmap" or "stat"
    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    width: int = 12
    stacked: bool = False
    log_scale: bool = False
    minimum: float | None = None
    thresholds: tuple[tuple[str, float | None], ...] = (("green", None),)


def timeseries(title: str, description: str, *queries: Query, **options: Any) -> Panel:
    """A time series panel."""
    return Panel("timeseries", title, description, queries, **options)


def heatmap(title: str, description: str, expr: str, **options: Any) -> Panel:
    """A heatmap of a histogram's buckets (the query must keep only ``le``)."""
    return Panel("heatmap", title, description, (Query(expr, "{{le}}"),), **options)


def stat(title: str, description: str, *queries: Query, **options: Any) -> Panel:
    """A single-value panel."""
    return Panel("stat", title, description, queries, **{"width": 6, **options})


@dataclass
class Layout:
    """Places rows and panels on the grid, left to right, top to bottom."""

    panels: list[Json] = field(default_factory=list)
    _next_id: int = 1
    _x: int = 0
    _y: int = 0

    def row(self, title: str, *panels: Panel) -> None:
        """A row header followed by its panels."""
        self._newline()
        self.panels.append(
            {
                "collapsed": False,
                "gridPos": {"h": 1, "w": GRID_COLUMNS, "x": 0, "y": self._y},
                "id": self._take_id(),
                "panels": [],
                "title": title,
                "type": "row",
            }
        )
        self._y += 1
        for panel in panels:
            self._place(panel)

    def _newline(self) -> None:
        if self._x:
            self._x, self._y = 0, self._y + PANEL_HEIGHT

    def _take_id(self) -> int:
        panel_id, self._next_id = self._next_id, self._next_id + 1
        return panel_id

    def _place(self, panel: Panel) -> None:
        if self._x + panel.width > GRID_COLUMNS:
            self._newline()
        grid = {"h": PANEL_HEIGHT, "w": panel.width, "x": self._x, "y": self._y}
        self.panels.append(_panel_json(panel, self._take_id(), grid))
        self._x += panel.width


def _panel_json(panel: Panel, panel_id: int, grid: Json) -> Json:
    targets = [
        {
            "datasource": DATASOURCE,
            "editorMode": "code",
            "expr": query.expr,
            "legendFormat": query.legend,
            "range": True,
            "refId": chr(ord("A") + index),
            **({"format": "heatmap"} if panel.kind == "heatmap" else {}),
        }
        for index, query in enumerate(panel.queries)
    ]
    defaults: Json = {
        "unit": panel.unit,
        "thresholds": {
            "mode": "absolute",
            "steps": [{"color": color, "value": value} for color, value in panel.thresholds],
        },
    }
    if panel.minimum is not None:
        defaults["min"] = panel.minimum
    if panel.kind == "timeseries":
        defaults["custom"] = _timeseries_custom(panel)
        defaults["color"] = {"mode": "palette-classic"}
    return {
        "datasource": DATASOURCE,
        "description": panel.description,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "gridPos": grid,
        "id": panel_id,
        "options": _OPTIONS[panel.kind](panel),
        "targets": targets,
        "title": panel.title,
        "type": panel.kind,
    }


def _timeseries_custom(panel: Panel) -> Json:
    custom: Json = {
        "drawStyle": "line",
        "fillOpacity": 20 if panel.stacked else 0,
        "lineWidth": 1,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"group": "A", "mode": "normal" if panel.stacked else "none"},
        "thresholdsStyle": {"mode": "off"},
    }
    if panel.log_scale:
        custom["scaleDistribution"] = {"log": 2, "type": "log"}
    return custom


def _timeseries_options(_: Panel) -> Json:
    return {
        "legend": {"calcs": [], "displayMode": "list", "placement": "bottom", "showLegend": True},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }


def _heatmap_options(panel: Panel) -> Json:
    return {
        "calculate": False,
        "cellGap": 1,
        "color": {
            "exponent": 0.5,
            "fill": "dark-orange",
            "mode": "scheme",
            "reverse": False,
            "scale": "exponential",
            "scheme": "Oranges",
            "steps": 64,
        },
        "filterValues": {"le": 1e-9},
        "legend": {"show": True},
        "rowsFrame": {"layout": "auto"},
        "tooltip": {"mode": "single", "showColorScale": False, "yHistogram": True},
        "yAxis": {"axisPlacement": "left", "reverse": False, "unit": panel.unit},
    }


def _stat_options(_: Panel) -> Json:
    return {
        "colorMode": "value",
        "graphMode": "none",
        "justifyMode": "auto",
        "orientation": "auto",
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "textMode": "auto",
    }


_OPTIONS = {"timeseries": _timeseries_options, "heatmap": _heatmap_options, "stat": _stat_options}


def query_variable(name: str, label: str, query: str) -> Json:
    """A multi-value query variable with an All option that matches anything."""
    return {
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "datasource": DATASOURCE,
        "includeAll": True,
        "label": label,
        "multi": True,
        "name": name,
        "query": query,
        "refresh": 2,
        "sort": 1,
        "type": "query",
    }


def datasource_variable() -> Json:
    """The Prometheus data source picker every panel uses."""
    return {
        "label": "Data source",
        "name": "datasource",
        "query": "prometheus",
        "refresh": 1,
        "type": "datasource",
    }


def dashboard(
    *,
    uid: str,
    title: str,
    description: str,
    tags: list[str],
    variables: list[Json],
    layout: Layout,
) -> Json:
    """The whole dashboard document, ready for import or provisioning."""
    return {
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "description": description,
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [],
        "panels": layout.panels,
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "tags": tags,
        "templating": {"list": variables},
        "time": {"from": "now-3h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "title": title,
        "uid": uid,
        "version": 1,
    }
