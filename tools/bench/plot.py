"""The suite's plot as a hand-written SVG (no plotting library needed):
left, samples/s of Ember and PyTorch per speed case (model, threads,
precision) with their ratio and the floor; right, test AUC and logloss of
Ember minus PyTorch per real dataset, with the +-0.003 parity band."""


def _esc(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _speed_panel(rows, x0, y0, w, h):
    out = ['<text x="%d" y="%d" font-weight="bold">samples/s (generated data, batch 2048)</text>'
           % (x0, y0 - 8)]
    if not rows:
        return out
    top = max(max(r["ember_sps"], r["torch_sps"], r.get("floor_sps", 0)) for r in rows) * 1.1
    band = h / len(rows)
    for i, r in enumerate(rows):
        y = y0 + i * band
        out.append('<text x="%d" y="%.0f" text-anchor="end">%s %dt %s</text>'
                   % (x0 + 110, y + band * 0.45, _esc(r["model"]), r["threads"],
                      _esc(r.get("precision", "f32"))))
        for j, (key, color) in enumerate((("ember_sps", "#d9480f"), ("torch_sps", "#1c7ed6"))):
            bw = (w - 190) * r[key] / top
            by = y + 4 + j * (band - 10) / 2
            out.append('<rect x="%d" y="%.0f" width="%.0f" height="%.0f" fill="%s"/>'
                       % (x0 + 120, by, bw, (band - 12) / 2, color))
            out.append('<text x="%.0f" y="%.0f" font-size="11">%.0f</text>'
                       % (x0 + 124 + bw, by + (band - 12) / 2 - 2, r[key]))
        if "floor_sps" in r:
            fx = x0 + 120 + (w - 190) * r["floor_sps"] / top
            out.append('<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="black" '
                       'stroke-dasharray="3,2"/>' % (fx, fx, y + 2, y + band - 4))
        out.append('<text x="%d" y="%.0f" font-size="11" text-anchor="end">%.2fx</text>'
                   % (x0 + w, y + band * 0.45, r["ratio"]))
    out.append('<text x="%d" y="%d" font-size="11"><tspan fill="#d9480f">&#9632; Ember</tspan> '
               '<tspan fill="#1c7ed6">&#9632; PyTorch</tspan> - - floor; right: Ember/PyTorch'
               '</text>' % (x0 + 120, y0 + h + 16))
    return out


def _quality_panel(rows, x0, y0, w, h):
    out = ['<text x="%d" y="%d" font-weight="bold">Ember minus PyTorch (real data, mean of seeds)'
           '</text>' % (x0, y0 - 8)]
    if not rows:
        return out
    scale = max(0.006, max(max(abs(r["auc_delta"]), abs(r["logloss_delta"])) for r in rows) * 1.2)
    cx = x0 + 120 + (w - 130) / 2
    px = (w - 130) / 2 / scale
    for limit in (-0.003, 0.003):
        out.append('<line x1="%.0f" x2="%.0f" y1="%d" y2="%d" stroke="#999" stroke-dasharray="3,2"/>'
                   % (cx + limit * px, cx + limit * px, y0, y0 + h))
    out.append('<line x1="%.0f" x2="%.0f" y1="%d" y2="%d" stroke="black"/>' % (cx, cx, y0, y0 + h))
    band = h / len(rows)
    for i, r in enumerate(rows):
        y = y0 + i * band
        out.append('<text x="%d" y="%.0f" text-anchor="end">%s %s</text>'
                   % (x0 + 110, y + band * 0.45, _esc(r["data"]), _esc(r["model"])))
        for j, (key, color) in enumerate((("auc_delta", "#2b8a3e"), ("logloss_delta", "#862e9c"))):
            v = r[key]
            by = y + 4 + j * (band - 10) / 2
            out.append('<rect x="%.0f" y="%.0f" width="%.1f" height="%.0f" fill="%s"/>'
                       % (min(cx, cx + v * px), by, max(1, abs(v) * px), (band - 12) / 2, color))
            out.append('<text x="%.0f" y="%.0f" font-size="11">%+.4f</text>'
                       % (cx + 6 if v < 0 else cx - 52, by + (band - 12) / 2 - 2, v))
    out.append('<text x="%d" y="%d" font-size="11"><tspan fill="#2b8a3e">&#9632; dAUC</tspan> '
               '(goal &gt;= -0.003) <tspan fill="#862e9c">&#9632; dlogloss</tspan> (goal &lt;= '
               '+0.003)</text>' % (x0 + 120, y0 + h + 16))
    return out


def write_svg(path, rows):
    speed = [r for r in rows if r["data"] == "generated"]
    quality = [r for r in rows if r["data"] != "generated"]
    h = max(200, 34 * max(len(speed), len(quality), 1))
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="1100" height="%d" '
             'font-family="sans-serif" font-size="12">' % (h + 70),
             '<rect width="100%" height="100%" fill="white"/>']
    parts += _speed_panel(speed, 10, 30, 520, h)
    parts += _quality_panel(quality, 560, 30, 520, h)
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")
