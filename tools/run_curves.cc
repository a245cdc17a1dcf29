#include "tools/run_curves.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/json.h"

namespace ember::tools {
namespace {

// A curve of a panel of the run's plot.
struct Curve {
  std::string name;
  const char* color;
  std::vector<double> y;
};

std::string SvgNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", value);
  return text;
}

// One panel of the plot, `top` pixels down: a frame, five ticks on each axis
// with their values, the curves (a line and a dot per point) and a legend.
void SvgPanel(std::string* svg, double top, const std::string& title,
              const std::vector<double>& x, const std::vector<Curve>& curves) {
  constexpr double kLeft = 70, kWidth = 560, kHeight = 200;
  double x0 = x.front(), x1 = x.back();
  double y0 = 1e300, y1 = -1e300;
  for (const Curve& c : curves) {
    for (double v : c.y) {
      y0 = std::min(y0, v);
      y1 = std::max(y1, v);
    }
  }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) {
    y0 -= 0.5 * std::max(1e-3, std::abs(y0));
    y1 = y0 + std::max(1e-3, std::abs(y0));
  }
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad;
  y1 += pad;
  const auto px = [&](double v) { return kLeft + (v - x0) / (x1 - x0) * kWidth; };
  const auto py = [&](double v) { return top + kHeight - (v - y0) / (y1 - y0) * kHeight; };
  char part[512];
  std::snprintf(part, sizeof(part),
                "<text x=\"%g\" y=\"%g\" font-size=\"14\">%s</text>\n"
                "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" "
                "stroke=\"#444\"/>\n",
                kLeft, top - 8, title.c_str(), kLeft, top, kWidth, kHeight);
  *svg += part;
  for (int i = 0; i <= 4; ++i) {
    const double xv = x0 + (x1 - x0) * i / 4, yv = y0 + (y1 - y0) * i / 4;
    std::snprintf(part, sizeof(part),
                  "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n"
                  "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"end\">%s</text>\n"
                  "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>\n",
                  px(xv), top + kHeight + 14, SvgNumber(xv).c_str(), kLeft - 4, py(yv) + 4,
                  SvgNumber(yv).c_str(), kLeft, py(yv), kLeft + kWidth, py(yv));
    *svg += part;
  }
  for (size_t c = 0; c < curves.size(); ++c) {
    std::string points;
    for (size_t i = 0; i < x.size(); ++i) {
      points += SvgNumber(px(x[i])) + "," + SvgNumber(py(curves[c].y[i])) + " ";
      std::snprintf(part, sizeof(part), "<circle cx=\"%g\" cy=\"%g\" r=\"2.5\" fill=\"%s\"/>\n",
                    px(x[i]), py(curves[c].y[i]), curves[c].color);
      *svg += part;
    }
    *svg += "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"" +
            std::string(curves[c].color) + "\" points=\"" + points + "\"/>\n";
    std::snprintf(part, sizeof(part),
                  "<text x=\"%g\" y=\"%g\" font-size=\"12\" fill=\"%s\">%s</text>\n",
                  kLeft + kWidth + 10, top + 16 + 16.0 * c, curves[c].color,
                  curves[c].name.c_str());
    *svg += part;
  }
}

}  // namespace

Json HistoryJson(const std::vector<engine::EvalPoint>& history) {
  Json json = Json::array();
  for (const engine::EvalPoint& p : history) {
    json.push_back({{"step", p.step},
                    {"examples", p.examples},
                    {"train_loss", p.train_loss},
                    {"test_auc", p.test.auc},
                    {"test_logloss", p.test.logloss},
                    {"samples_per_sec", p.samples_per_sec}});
  }
  return json;
}

// A small writer of our own, not matplotlib: `ember` stays one binary that
// draws its curves wherever it runs, with nothing to find or install.
std::string RunCurvesSvg(const std::vector<engine::EvalPoint>& history, const std::string& model) {
  std::vector<double> x;
  Curve train_loss{"train loss", "#1f77b4", {}}, test_logloss{"test logloss", "#d62728", {}};
  Curve test_auc{"test AUC", "#2ca02c", {}};
  for (const engine::EvalPoint& p : history) {
    x.push_back(static_cast<double>(p.examples));
    train_loss.y.push_back(p.train_loss);
    test_logloss.y.push_back(p.test.logloss);
    test_auc.y.push_back(p.test.auc);
  }
  std::string svg =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"760\" height=\"560\" "
      "font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  SvgPanel(&svg, 40, "ember train --model=" + model + ": loss", x, {train_loss, test_logloss});
  SvgPanel(&svg, 310, "test AUC", x, {test_auc});
  svg += "<text x=\"350\" y=\"545\" font-size=\"12\" text-anchor=\"middle\">training "
         "examples</text>\n</svg>\n";
  return svg;
}

}  // namespace ember::tools
