//! Comparison charts with plotters. One drawing function per chart feeds both backends (SVG and PNG),
//! and every text is set in DejaVu Sans embedded in the binary, so charts render the same bytes on a
//! fresh machine with no system font library.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{register_font, FontStyle};
use plotters_backend::{BackendCoord, DrawingErrorKind};
use sim::metric_defs::{metric, MetricDef};
use sim::summary::{Metrics, RunSummary, Status};
use std::sync::Once;

/// Room for the strategy names left of a bar panel: 140 pixels, wider for long (composed) names
/// so that none is cut at the edge.
fn name_area(names: &[String]) -> u32 {
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0) as u32;
    (16 + 7 * longest).max(140)
}

/// The embedded font (DejaVu Sans, Bitstream Vera licence: cli/assets/DejaVu-LICENSE.txt).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
/// The family name every chart text uses; it resolves only to the embedded font.
const FAMILY: &str = "sans-serif";

fn ensure_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType file shipped with the source: failing here is a build bug.
        if register_font(FAMILY, FontStyle::Normal, FONT).is_err() {
            panic!("the embedded DejaVu Sans does not parse");
        }
    });
}

/// A rendered chart in both formats.
#[derive(Clone, Debug)]
pub struct Figure {
    /// SVG text.
    pub svg: String,
    /// PNG bytes.
    pub png: Vec<u8>,
}

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("chart: {0}")]
pub struct ChartError(String);

fn err<E: std::fmt::Debug>(e: E) -> ChartError {
    ChartError(format!("{e:?}"))
}

type Drawn<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// A chart that can draw itself on any backend.
trait Draw {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Drawn<DB>;
}

/// Draws the chart once into an SVG string and once into an RGB buffer encoded as PNG.
fn render(size: (u32, u32), chart: &impl Draw) -> Result<Figure, ChartError> {
    ensure_font();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        chart.draw(&root).map_err(err)?;
        root.present().map_err(err)?;
    }
    let mut rgb = vec![0u8; size.0 as usize * size.1 as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        chart.draw(&root).map_err(err)?;
        root.present().map_err(err)?;
    }
    let mut png = Vec::new();
    {
        // The png crate directly (what `image`'s PngEncoder wraps, with the same settings: RGB8,
        // default compression, adaptive filtering), without `image` and its other codecs.
        // Default compression: a third of the size of the fastest setting, and a quarter of the
        // time of the best (which a sweep would pay serially after its parallel runs).
        let mut encoder = png::Encoder::new(&mut png, size.0, size.1);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Default);
        encoder.set_filter(png::FilterType::Sub);
        encoder.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
        let mut writer = encoder.write_header().map_err(err)?;
        writer.write_image_data(&rgb).map_err(err)?;
        writer.finish().map_err(err)?;
    }
    Ok(Figure { svg, png })
}

/// Colours for the metric panels (colour-blind safe, Okabe-Ito).
const BLUE_: RGBColor = RGBColor(0, 114, 178);
const VERMILION: RGBColor = RGBColor(213, 94, 0);
const ORANGE: RGBColor = RGBColor(230, 159, 0);
const GREEN_: RGBColor = RGBColor(0, 158, 115);
const PURPLE: RGBColor = RGBColor(204, 121, 167);
const SKY: RGBColor = RGBColor(86, 180, 233);
const GREY: RGBColor = RGBColor(90, 90, 90);
const YELLOW_: RGBColor = RGBColor(190, 170, 0);
const INK: RGBColor = RGBColor(0, 0, 0);
const BROWN: RGBColor = RGBColor(140, 80, 20);
/// The fine grid: barely there, so the data stands out.
const LIGHT: RGBColor = RGBColor(238, 238, 238);

/// Sixteen strategy colours: Okabe-Ito first, then darker and lighter hues far from them.
const STRATEGY_PALETTE: [RGBColor; 16] = [
    GREY,
    BLUE_,
    VERMILION,
    GREEN_,
    PURPLE,
    ORANGE,
    SKY,
    YELLOW_,
    INK,
    BROWN,
    RGBColor(40, 50, 140),
    RGBColor(0, 128, 128),
    RGBColor(140, 20, 60),
    RGBColor(100, 120, 30),
    RGBColor(130, 80, 200),
    RGBColor(120, 200, 60),
];

/// One colour per strategy, by its position in the registry (composed pairs after the
/// registry, in `sim list` order), so a strategy keeps its colour on every chart.
pub fn strategy_color(name: &str) -> RGBColor {
    let n = STRATEGY_PALETTE.len();
    let mut i = strategy_index(name) % n;
    // A composed pair is never drawn in the colour of one of its parts, which a chart may show
    // beside it.
    if let Some((d, h)) = name.split_once('+') {
        let parts = [strategy_index(d) % n, strategy_index(h) % n];
        while parts.contains(&i) {
            i = (i + 1) % n;
        }
    }
    STRATEGY_PALETTE[i]
}

/// A stacked component of a bar panel: a figure (its path in [`sim::metric_defs::METRICS`], which
/// gives its label) and its colour.
struct Part {
    path: &'static str,
    color: RGBColor,
}

impl Part {
    fn def(&self) -> &'static MetricDef {
        metric(self.path).expect("a charted figure is defined")
    }

    fn value(&self, m: &Metrics) -> f64 {
        m.numeric(self.path).unwrap_or(0.0)
    }
}

/// A panel of the run chart: one horizontal bar per strategy, its parts stacked. Its title joins
/// the parts' titles, its unit is the first part's.
struct Panel {
    parts: Vec<Part>,
}

impl Panel {
    fn title(&self) -> String {
        let t: Vec<&str> = self.parts.iter().map(|p| p.def().title).collect();
        let mut s = t[0].to_string();
        for x in &t[1..] {
            s.push_str(" + ");
            s.push_str(&x.to_lowercase());
        }
        s
    }

    fn unit(&self) -> &'static str {
        self.parts[0].def().unit
    }
}

fn run_panels() -> Vec<Panel> {
    let p = |path, color| Part { path, color };
    let panel = |parts| Panel { parts };
    vec![
        panel(vec![p("ordering_violations", VERMILION)]),
        panel(vec![p("stale_writes", PURPLE)]),
        panel(vec![p("lost", VERMILION), p("duplicates", ORANGE)]),
        panel(vec![
            p("stale_rejected", PURPLE),
            p("dead_lettered", GREY),
            p("dropped", SKY),
        ]),
        panel(vec![p("throughput_per_s", GREEN_)]),
        panel(vec![p("latency_ms.p99", BLUE_)]),
        panel(vec![p("max_block_ms", SKY)]),
        // Everything that never took effect (pending included), in a colour no other part has:
        // what the verdict fails first.
        panel(vec![p("undelivered", BROWN)]),
    ]
}

/// A number for a label: integers as such, others with one decimal or none when large.
pub fn short_number(x: f64) -> String {
    if x.abs() < 0.05 {
        // Also keeps "-0.0" out of labels.
        "0".to_string()
    } else if (x.fract() == 0.0 && x.abs() < 1e15) || x.abs() >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// The unit to show durations given in milliseconds whose largest is `max_ms`, and its size in ms.
pub fn duration_scale(max_ms: f64) -> (&'static str, f64) {
    if max_ms >= 2.0 * 3_600_000.0 {
        ("h", 3_600_000.0)
    } else if max_ms >= 10.0 * 60_000.0 {
        ("min", 60_000.0)
    } else if max_ms >= 10_000.0 {
        ("s", 1_000.0)
    } else {
        ("ms", 1.0)
    }
}

/// `x` with at most `decimals` decimals, trailing zeros dropped, never "-0".
pub fn trimmed(x: f64, decimals: usize) -> String {
    let s = format!("{x:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        &s
    };
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// A number for an axis tick: enough decimals to tell neighbouring ticks apart.
pub fn tick_number(x: f64) -> String {
    trimmed(x, if x.abs() >= 1000.0 { 0 } else { 3 })
}

/// Height of one line of the run chart's verdicts.
const VERDICT_LINE: u32 = 22;

/// The verdict lines' rows: two strategies a row.
fn verdict_rows(s: &RunSummary) -> u32 {
    (s.strategies.len() as u32).div_ceil(2)
}

/// The run chart: eight panels in two rows ([`run_panels`]: violations, stale writes, lost +
/// duplicates, stale rejected + dead-lettered + dropped, throughput, p99 latency, head-of-line
/// block, never delivered), one bar per strategy, the values written at the bars' ends; under
/// them each strategy's verdict.
pub fn run_chart(s: &RunSummary) -> Result<Figure, ChartError> {
    let n = s.strategies.len().max(1) as u32;
    // Title, legend strip, axis and its description take about 150 pixels; then a bar per row.
    let panel_h = 150 + 30 * n;
    let size = (1800, 60 + 2 * panel_h + 40 + VERDICT_LINE * verdict_rows(s));
    let title = match s.strategies.len() {
        1 => format!(
            "{}: seed {}, {}",
            s.scenario, s.seed, s.strategies[0].strategy
        ),
        k => format!(
            "{}: seed {}, {k} strategies against the same faults",
            s.scenario, s.seed
        ),
    };
    struct RunChart<'a>(&'a RunSummary, String);
    impl Draw for RunChart<'_> {
        fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Drawn<DB> {
            draw_run(root, self.0, &self.1)
        }
    }
    render(size, &RunChart(s, title))
}

fn draw_run<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    s: &RunSummary,
    title: &str,
) -> Drawn<DB> {
    let area = root.titled(title, (FAMILY, 26))?;
    let (_, h) = area.dim_in_pixel();
    let (grid, verdicts) = area.split_vertically(h - 40 - VERDICT_LINE * verdict_rows(s));
    let panels = run_panels();
    for (cell, panel) in grid
        .split_evenly((2, panels.len().div_ceil(2)))
        .iter()
        .zip(&panels)
    {
        draw_bar_panel(cell, s, panel)?;
    }
    draw_verdicts(&verdicts, s)
}

/// Each strategy's verdict in one line, two a row, in the order of the bars: a failure in
/// vermilion, marked ✗, a pass in black, marked ✓.
fn draw_verdicts<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, s: &RunSummary) -> Drawn<DB> {
    let (w, _) = area.dim_in_pixel();
    area.draw(&Text::new(
        "Verdicts (the guarantee held and everything was delivered, or why not)".to_string(),
        (20, 10),
        (FAMILY, 18),
    ))?;
    let rows = verdict_rows(s) as usize;
    for (i, st) in s.strategies.iter().enumerate() {
        let (col, row) = (i / rows.max(1), i % rows.max(1));
        let x = 20 + col as i32 * (w as i32 / 2);
        let y = 40 + row as i32 * VERDICT_LINE as i32;
        let (mark, colour, text) = match (st.valid, &st.verdict) {
            (Some(true), Some(v)) => ("✓", INK, v.as_str()),
            (Some(false), Some(v)) => ("✗", VERMILION, v.as_str()),
            _ => ("·", GREY, "not judged"),
        };
        area.draw(&Text::new(
            format!("{mark} {}: {text}", st.strategy),
            (x, y),
            TextStyle::from((FAMILY, 15).into_font()).color(&colour),
        ))?;
    }
    Ok(())
}

fn draw_bar_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    s: &RunSummary,
    panel: &Panel,
) -> Drawn<DB> {
    let n = s.strategies.len();
    let mut rows: Vec<(String, Option<Vec<f64>>)> = s
        .strategies
        .iter()
        .map(|st| {
            let vals = match (&st.status, &st.metrics) {
                (Status::Ok, Some(m)) => Some(panel.parts.iter().map(|p| p.value(m)).collect()),
                _ => None,
            };
            (st.strategy.clone(), vals)
        })
        .collect();
    // A value that is not a finite number has no bar (an infinite axis never finishes its ticks).
    for (_, vals) in rows.iter_mut() {
        for v in vals.iter_mut().flatten() {
            if !v.is_finite() {
                *v = 0.0;
            }
        }
    }
    let mut max = rows
        .iter()
        .filter_map(|(_, v)| v.as_ref().map(|v| v.iter().sum::<f64>()))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let mut unit = panel.unit();
    let mut div = 1.0;
    if unit == "ms" {
        // Hours of outage read better in minutes than as seven-digit milliseconds.
        let (u, d) = duration_scale(max);
        (unit, div) = (u, d);
        max /= div;
        for (_, vals) in rows.iter_mut() {
            for v in vals.iter_mut().flatten() {
                *v /= div;
            }
        }
    }
    // Room on the right for the value labels (longer when parts are stacked: "703 + 0 + 0").
    let room = 1.15 + 0.1 * panel.parts.len() as f64;
    let x_max = if max > 0.0 { max * room } else { 1.0 };
    // Row 0 at the top.
    let y_of = |i: usize| n - 1 - i;
    let names: Vec<String> = rows.iter().map(|(name, _)| name.clone()).collect();
    // Title, then a strip for the legend of stacked parts (a legend inside the plot would cover
    // bars), then the plot.
    // A panel where every bar is zero says so in its title rather than looking empty.
    let all_zero = max == 0.0;
    let title = if all_zero {
        format!("{}: all zero", panel.title())
    } else {
        panel.title()
    };
    let area = area.margin(8, 0, 0, 0).titled(&title, (FAMILY, 20))?;
    let (legend, area) = area.split_vertically(22);
    if panel.parts.len() > 1 {
        let (w, _) = legend.dim_in_pixel();
        let slot = (w as i32 / panel.parts.len() as i32).min(160);
        let mut x = w as i32 / 2 - slot / 2 * panel.parts.len() as i32;
        for part in &panel.parts {
            legend.draw(&Rectangle::new([(x, 4), (x + 14, 18)], part.color.filled()))?;
            legend.draw(&Text::new(
                part.def().title.to_lowercase(),
                (x + 20, 4),
                (FAMILY, 14),
            ))?;
            x += slot;
        }
    }
    // Counts on a short axis get whole ticks only (no "1.5 duplicates"): plotters steps by 1, 2
    // or 5 times a power of ten, so no more ticks than whole numbers up to the end gives a step
    // of at least 1.
    let whole = rows
        .iter()
        .filter_map(|(_, v)| v.as_ref())
        .flatten()
        .all(|v| v.fract() == 0.0);
    let ticks = if whole {
        (x_max.floor() as usize + 1).clamp(2, 6)
    } else {
        6
    };
    let mut chart = ChartBuilder::on(&area)
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(name_area(&names))
        .build_cartesian_2d(0f64..x_max, (0..n).into_segmented())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(y) if *y < n => names[n - 1 - *y].clone(),
            _ => String::new(),
        })
        .x_label_formatter(&|x| tick_number(*x))
        .x_labels(ticks)
        .x_desc(unit)
        .light_line_style(LIGHT)
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 14))
        .draw()?;
    for k in 0..panel.parts.len() {
        let part = &panel.parts[k];
        let bars = rows.iter().enumerate().filter_map(|(i, (_, vals))| {
            let vals = vals.as_ref()?;
            let start: f64 = vals[..k].iter().sum();
            let end = start + vals[k];
            let mut r = Rectangle::new(
                [
                    (start, SegmentValue::Exact(y_of(i))),
                    (end, SegmentValue::Exact(y_of(i) + 1)),
                ],
                part.color.filled(),
            );
            r.set_margin(6, 6, 0, 0);
            Some(r)
        });
        chart.draw_series(bars)?;
    }
    let label_style = TextStyle::from((FAMILY, 14).into_font())
        .pos(Pos::new(HPos::Left, VPos::Center))
        .color(&BLACK);
    // A duration is written in the unit that suits its own size (41ms, not "0" on an axis in
    // minutes); other figures as numbers.
    let value_text = |x: f64| {
        if panel.unit() == "ms" {
            duration_value(x * div)
        } else {
            short_number(x)
        }
    };
    // A latency of a run that left messages undelivered is a lower bound (they count at its end).
    let censored: Vec<bool> = s
        .strategies
        .iter()
        .map(|st| {
            panel.parts[0].path.starts_with("latency_ms.")
                && st.metrics.as_ref().is_some_and(|m| m.undelivered > 0)
        })
        .collect();
    let labels = rows.iter().enumerate().map(|(i, (_, vals))| {
        let text = match vals {
            Some(v) if panel.parts.len() > 1 => v
                .iter()
                .map(|x| value_text(*x))
                .collect::<Vec<_>>()
                .join(" + "),
            Some(v) if censored[i] => format!("{}{}", crate::report::LOWER_BOUND, value_text(v[0])),
            Some(v) => value_text(v[0]),
            None => "n/a".to_string(),
        };
        let end = vals.as_ref().map(|v| v.iter().sum()).unwrap_or(0.0);
        Text::new(
            format!(" {text}"),
            (end, SegmentValue::CenterOf(y_of(i))),
            label_style.clone(),
        )
    });
    chart.draw_series(labels)?;
    Ok(())
}

/// One line of a sweep chart: a strategy's mean per x value, with its 95% interval.
#[derive(Clone, Debug)]
pub struct Line {
    /// Strategy name.
    pub strategy: String,
    /// The points; x values without one are skipped.
    pub points: Vec<Point>,
}

/// A point of a sweep line.
#[derive(Clone, Copy, Debug)]
pub struct Point {
    /// Index of the x value.
    pub x: usize,
    /// The mean across seeds (or the single value).
    pub mean: f64,
    /// The 95% interval of the mean, if there is one.
    pub ci95: Option<(f64, f64)>,
}

/// One panel of a sweep chart: a metric against the swept parameter.
#[derive(Clone, Debug)]
pub struct SweepPanel {
    /// Title.
    pub title: String,
    /// Y axis description.
    pub unit: String,
    /// One line per strategy.
    pub lines: Vec<Line>,
}

/// The x axis of a sweep chart.
#[derive(Clone, Debug)]
pub struct XAxis {
    /// The swept parameter (its path).
    pub name: String,
    /// The values as written on the command line.
    pub labels: Vec<String>,
    /// The values as numbers, when every value is one (a numeric axis); otherwise the values are
    /// categories, evenly spaced.
    pub numeric: Option<Vec<f64>>,
}

impl XAxis {
    fn position(&self, i: usize) -> f64 {
        match &self.numeric {
            Some(v) => v[i],
            None => i as f64,
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        let k = self.labels.len();
        match &self.numeric {
            Some(v) => {
                let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
                let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let pad = if hi > lo { (hi - lo) * 0.05 } else { 1.0 };
                (lo - pad)..(hi + pad)
            }
            None => -0.5..(k as f64 - 0.5),
        }
    }
}

/// The sweep chart: one panel per metric, x = the swept parameter, one line per strategy (means
/// across seeds, with 95% interval bars), and a shared legend.
pub fn sweep_chart(title: &str, x: &XAxis, panels: &[SweepPanel]) -> Result<Figure, ChartError> {
    let cols = 3u32;
    let rows = (panels.len() as u32).div_ceil(cols).max(1);
    let size = (1500, 70 + 50 + 26 + rows * 380);
    struct SweepChart<'a>(&'a str, &'a XAxis, &'a [SweepPanel], usize);
    impl Draw for SweepChart<'_> {
        fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Drawn<DB> {
            draw_sweep(root, self.0, self.1, self.2, self.3)
        }
    }
    render(size, &SweepChart(title, x, panels, cols as usize))
}

fn draw_sweep<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    x: &XAxis,
    panels: &[SweepPanel],
    cols: usize,
) -> Drawn<DB> {
    // A second line of the title (after a newline) is a smaller subtitle.
    let (main, sub) = title.split_once('\n').unwrap_or((title, ""));
    let area = root.titled(main, (FAMILY, 24))?;
    let area = if sub.is_empty() {
        area
    } else {
        let (line, rest) = area.split_vertically(26);
        let (w, _) = line.dim_in_pixel();
        line.draw(&Text::new(
            sub.to_string(),
            (w as i32 / 2, 2),
            TextStyle::from((FAMILY, 16).into_font()).pos(Pos::new(HPos::Center, VPos::Top)),
        ))?;
        rest
    };
    let (h_w, h_h) = area.dim_in_pixel();
    let (grid, legend) = area.split_vertically(h_h.saturating_sub(50));
    let rows = panels.len().div_ceil(cols).max(1);
    for (cell, panel) in grid.split_evenly((rows, cols)).iter().zip(panels) {
        draw_sweep_panel(cell, x, panel)?;
    }
    // The shared legend: one entry per strategy, in the order of the first panel.
    if let Some(first) = panels.first() {
        let n = first.lines.len().max(1);
        let slot = (h_w as usize / n).min(220) as i32;
        let start = (h_w as i32 - slot * n as i32) / 2;
        for (i, line) in first.lines.iter().enumerate() {
            let c = strategy_color(&line.strategy);
            let x0 = start + slot * i as i32 + 10;
            let y = 25;
            legend.draw(&PathElement::new(
                vec![(x0, y), (x0 + 28, y)],
                c.stroke_width(3),
            ))?;
            legend.draw(&marker(strategy_index(&line.strategy), (x0 + 14, y), c))?;
            legend.draw(&Text::new(
                line.strategy.clone(),
                (x0 + 36, y - 9),
                (FAMILY, 16),
            ))?;
        }
    }
    Ok(())
}

/// A strategy's position in the registry, then the composed pairs' (`sim list` order): its
/// colour and its marker on every chart. Colours repeat every 16 and shapes every 12, so the
/// (colour, shape) pair is a strategy's own for the first 48.
fn strategy_index(name: &str) -> usize {
    let n = strategies::ALL.len();
    strategies::ALL
        .iter()
        .position(|s| s.name == name)
        .or_else(|| {
            strategies::compose::pairs()
                .iter()
                .position(|p| p == name)
                .map(|i| n + i)
        })
        .unwrap_or(n + strategies::compose::pairs().len())
}

/// One marker shape per strategy (twelve shapes, with distinct colours too), so that coinciding
/// lines and colour-blind readers can still tell the strategies apart.
struct Marker<C> {
    at: C,
    shape: usize,
    color: RGBColor,
}

/// Distinct marker shapes (and strategy colours): a strategy's pair is its own up to this many.
const MARKER_SHAPES: usize = 12;

fn marker<C>(i: usize, at: C, color: RGBColor) -> Marker<C> {
    Marker {
        at,
        shape: i % MARKER_SHAPES,
        color,
    }
}

impl<'a, C> PointCollection<'a, C> for &'a Marker<C> {
    type Point = &'a C;
    type IntoIter = std::iter::Once<&'a C>;
    fn point_iter(self) -> Self::IntoIter {
        std::iter::once(&self.at)
    }
}

impl<C, DB: DrawingBackend> Drawable<DB> for Marker<C> {
    fn draw<I: Iterator<Item = BackendCoord>>(
        &self,
        mut pos: I,
        backend: &mut DB,
        _: (u32, u32),
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        let Some((x, y)) = pos.next() else {
            return Ok(());
        };
        let fill: ShapeStyle = self.color.filled();
        let line: ShapeStyle = self.color.stroke_width(2);
        let triangle = [(x, y - 6), (x - 6, y + 4), (x + 6, y + 4)];
        match self.shape {
            0 => backend.draw_circle((x, y), 5, &fill, true),
            1 => backend.fill_polygon(triangle, &fill),
            2 => {
                backend.draw_line((x - 5, y - 5), (x + 5, y + 5), &line)?;
                backend.draw_line((x - 5, y + 5), (x + 5, y - 5), &line)
            }
            3 => backend.draw_circle((x, y), 5, &line, false),
            4 => backend.draw_rect((x - 4, y - 4), (x + 4, y + 4), &fill, true),
            5 => backend.draw_rect((x - 4, y - 4), (x + 4, y + 4), &line, false),
            6 => backend.draw_path([triangle[0], triangle[1], triangle[2], triangle[0]], &line),
            7 => {
                backend.draw_line((x - 6, y), (x + 6, y), &line)?;
                backend.draw_line((x, y - 6), (x, y + 6), &line)
            }
            8 => {
                let diamond = [(x, y - 6), (x - 6, y), (x, y + 6), (x + 6, y)];
                backend.fill_polygon(diamond, &fill)
            }
            9 => {
                let diamond = [(x, y - 6), (x - 6, y), (x, y + 6), (x + 6, y), (x, y - 6)];
                backend.draw_path(diamond, &line)
            }
            10 => backend.fill_polygon([(x, y + 6), (x - 6, y - 4), (x + 6, y - 4)], &fill),
            _ => {
                backend.draw_line((x - 6, y), (x + 6, y), &line)?;
                backend.draw_line((x - 4, y - 5), (x + 4, y + 5), &line)?;
                backend.draw_line((x - 4, y + 5), (x + 4, y - 5), &line)
            }
        }
    }
}

fn draw_sweep_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    x: &XAxis,
    panel: &SweepPanel,
) -> Drawn<DB> {
    // Only finite figures are drawn: an infinite one would make an axis whose ticks never end.
    let finite_panel;
    let panel = if panel.lines.iter().flat_map(|l| &l.points).all(|p| {
        p.mean.is_finite()
            && p.ci95
                .is_none_or(|(lo, hi)| lo.is_finite() && hi.is_finite())
    }) {
        panel
    } else {
        finite_panel = SweepPanel {
            title: panel.title.clone(),
            unit: panel.unit.clone(),
            lines: panel
                .lines
                .iter()
                .map(|l| Line {
                    strategy: l.strategy.clone(),
                    points: l
                        .points
                        .iter()
                        .filter(|p| p.mean.is_finite())
                        .map(|p| Point {
                            x: p.x,
                            mean: p.mean,
                            ci95: p.ci95.filter(|(lo, hi)| lo.is_finite() && hi.is_finite()),
                        })
                        .collect(),
                })
                .collect(),
        };
        &finite_panel
    };
    let y_max = panel
        .lines
        .iter()
        .flat_map(|l| l.points.iter())
        .map(|p| p.ci95.map_or(p.mean, |(_, hi)| hi).max(p.mean))
        .fold(0.0f64, f64::max);
    // Durations in ms are shown in the unit that suits their size.
    let (unit, div) = if panel.unit == "ms" {
        duration_scale(y_max)
    } else {
        (panel.unit.as_str(), 1.0)
    };
    let scaled: Vec<Line> = panel
        .lines
        .iter()
        .map(|l| Line {
            strategy: l.strategy.clone(),
            points: l
                .points
                .iter()
                .map(|p| Point {
                    x: p.x,
                    mean: p.mean / div,
                    ci95: p.ci95.map(|(lo, hi)| (lo / div, hi / div)),
                })
                .collect(),
        })
        .collect();
    let y_max = y_max / div;
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let mut chart: ChartContext<DB, Cartesian2d<RangedCoordf64, RangedCoordf64>> =
        ChartBuilder::on(area)
            .caption(&panel.title, (FAMILY, 19))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(x.range(), 0f64..y_max)?;
    let labels = x.labels.clone();
    let numeric = x.numeric.is_some();
    let cat_label = move |v: &f64| -> String {
        let i = v.round();
        if (v - i).abs() < 1e-9 && i >= 0.0 && (i as usize) < labels.len() {
            labels[i as usize].clone()
        } else {
            String::new()
        }
    };
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(&x.name)
        .light_line_style(LIGHT)
        .y_desc(unit)
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 14))
        .y_label_formatter(&|y| tick_number(*y));
    if numeric {
        // Counts (consumers, partitions) get whole ticks only: no 3.5 consumers. Plotters steps
        // by 1, 2 or 5 times a power of ten, so asking for no more ticks than whole numbers in
        // the range gives a step of at least 1.
        let ticks = match &x.numeric {
            Some(v) if v.iter().all(|x| x.fract() == 0.0) => {
                let (lo, hi) = v
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
                        (a.min(*x), b.max(*x))
                    });
                ((hi - lo) as usize + 1).clamp(2, 8)
            }
            _ => 8,
        };
        mesh.x_labels(ticks).x_label_formatter(&|v| tick_number(*v));
    } else {
        mesh.x_labels(x.labels.len() * 2 + 1)
            .x_label_formatter(&cat_label)
            .disable_x_mesh();
    }
    mesh.draw()?;
    // Strategies with the same values would hide each other: each line is shifted sideways by a
    // small step of its own (a dodge), in the order of the legend.
    let width = x.range().end - x.range().start;
    let step = width * 0.008;
    let n = scaled.len() as f64;
    for (li, line) in scaled.iter().enumerate() {
        let c = strategy_color(&line.strategy);
        let dodge = (li as f64 - (n - 1.0) / 2.0) * step;
        let pts: Vec<(f64, f64)> = line
            .points
            .iter()
            .map(|p| (x.position(p.x) + dodge, p.mean))
            .collect();
        chart.draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?;
        chart.draw_series(line.points.iter().filter_map(|p| {
            let (lo, hi) = p.ci95?;
            let xp = x.position(p.x) + dodge;
            // The bar's own dot sits on the mean (under the line's marker), not mid-interval:
            // an interval cut at 0 is not centred on its mean.
            Some(ErrorBar::new_vertical(
                xp,
                lo,
                p.mean,
                hi,
                c.stroke_width(1),
                8,
            ))
        }))?;
        let mi = strategy_index(&line.strategy);
        chart.draw_series(pts.iter().map(|p| marker(mi, *p, c)))?;
    }
    Ok(())
}

/// A duration in milliseconds as a short axis label (`45ms`, `1.8s`, `14min`).
fn duration_label(ms: f64) -> String {
    if ms >= 120_000.0 {
        format!("{}min", trimmed(ms / 60_000.0, 1))
    } else if ms >= 1_000.0 {
        format!("{}s", trimmed(ms / 1_000.0, 1))
    } else {
        format!("{}ms", trimmed(ms, 2))
    }
}

/// A duration in milliseconds as a bar's label, in the unit that suits its size, about three
/// significant digits (`0.4ms`, `75.3ms`, `720ms`, `12.2s`, `60.4min`, `3.2h`).
fn duration_value(ms: f64) -> String {
    if ms >= 2.0 * 3_600_000.0 {
        format!("{}h", short_number(ms / 3_600_000.0))
    } else if ms >= 120_000.0 {
        format!("{}min", short_number(ms / 60_000.0))
    } else if ms >= 1_000.0 {
        format!("{}s", short_number(ms / 1_000.0))
    } else if ms > 0.0 && ms < 0.05 {
        "<0.1ms".to_string()
    } else {
        format!("{}ms", short_number(ms))
    }
}

/// One strategy's point on the cost chart.
struct CostPoint {
    strategy: String,
    guarantee: &'static str,
    p99_ms: f64,
    figure: f64,
    /// Where it ranks ([`sim::verdict::rank`]).
    rank: sim::verdict::Rank,
    /// Its verdict, if judged.
    verdict: Option<String>,
}

/// What order costs: each strategy's guarantee figure (the one its promise is about:
/// `ordering_violations` or `stale_writes`, `sim list`) against its p99 latency, on a log time
/// axis. Down and to the left is better; a strategy at 0 keeps its promise in this run. A
/// strategy that left messages undelivered is drawn in a band above all the others, whatever
/// its figure ([`cost_heights`]), and its p99 counts them at the run's end.
pub fn cost_chart(s: &RunSummary) -> Result<Figure, ChartError> {
    let points: Vec<CostPoint> = s
        .strategies
        .iter()
        .filter_map(|st| {
            let m = st.metrics.as_ref().filter(|_| st.status == Status::Ok)?;
            let guarantee = strategies::guarantee(&st.strategy);
            let rank = sim::verdict::rank(m, guarantee);
            (rank.figure.is_finite() && rank.p99_ms.is_finite()).then(|| CostPoint {
                strategy: st.strategy.clone(),
                guarantee,
                p99_ms: rank.p99_ms,
                figure: rank.figure,
                rank,
                verdict: st.verdict.clone(),
            })
        })
        .collect();
    let title = format!(
        "{}, seed {}: what order costs (each strategy's guarantee figure against its p99 latency)",
        s.scenario, s.seed
    );
    struct CostChart<'a>(&'a [CostPoint], String);
    impl Draw for CostChart<'_> {
        fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Drawn<DB> {
            draw_cost(root, self.0, &self.1)
        }
    }
    render((1200, 760), &CostChart(&points, title))
}

/// The vertical layout of the cost chart.
#[derive(Debug)]
struct CostHeights {
    /// Each point's height, in the order given.
    y: Vec<f64>,
    /// The top of the guarantee figure's axis: the band of the strategies that left messages
    /// undelivered starts here.
    plain_top: f64,
    /// The top of the plot.
    top: f64,
}

/// Where the cost chart draws each strategy vertically: one that delivered everything at its
/// guarantee figure; one that did not in a band above every one of those, higher the worse it
/// ranks ([`sim::verdict::rank`]: more left undelivered is higher). So not delivering can never
/// put a strategy lower (better) than one that delivered everything.
fn cost_heights(ranks: &[sim::verdict::Rank]) -> CostHeights {
    let max = ranks
        .iter()
        .filter(|r| r.undelivered == 0)
        .map(|r| r.figure)
        .fold(0.0f64, f64::max);
    let plain_top = if max > 0.0 { max * 1.15 } else { 1.0 };
    let mut failed: Vec<usize> = (0..ranks.len())
        .filter(|&i| ranks[i].undelivered > 0)
        .collect();
    failed.sort_by(|&a, &b| {
        ranks[a]
            .partial_cmp(&ranks[b])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let band = if failed.is_empty() {
        0.0
    } else {
        plain_top * 0.5
    };
    let mut y: Vec<f64> = ranks.iter().map(|r| r.figure).collect();
    for (k, &i) in failed.iter().enumerate() {
        y[i] = plain_top + band * (k + 1) as f64 / (failed.len() + 1) as f64;
    }
    CostHeights {
        y,
        plain_top,
        top: plain_top + band,
    }
}

/// The band of the strategies that left messages undelivered.
const UNDELIVERED_BAND: RGBColor = RGBColor(252, 232, 224);

fn draw_cost<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    points: &[CostPoint],
    title: &str,
) -> Drawn<DB> {
    let area = root.titled(title, (FAMILY, 20))?;
    // Latencies below 0.1ms are drawn at 0.1ms: the axis is logarithmic.
    let floor = 0.1;
    let xs = points.iter().map(|p| p.p99_ms.max(floor));
    let (lo, hi) = xs.fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    // Whole decades, so that the log axis has ticks to read.
    let (lo, hi) = if points.is_empty() {
        (1.0, 1000.0)
    } else {
        let lo = 10f64.powf(lo.log10().floor());
        let hi = 10f64.powf(hi.log10().ceil());
        (lo, if hi > lo { hi } else { lo * 10.0 })
    };
    let ranks: Vec<sim::verdict::Rank> = points.iter().map(|p| p.rank).collect();
    let heights = cost_heights(&ranks);
    let plain_top = heights.plain_top;
    let ticks: Vec<(f64, &str)> = LOG_TIME_TICKS
        .iter()
        .copied()
        .filter(|(ms, _)| (lo..=hi).contains(ms))
        .collect();
    let mut chart = ChartBuilder::on(&area)
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(80)
        // A little room below 0, so that the strategies at 0 (the ones that kept their promise)
        // are not drawn on the axis.
        .build_cartesian_2d(
            (lo..hi)
                .log_scale()
                .with_key_points(ticks.iter().map(|t| t.0).collect()),
            -plain_top * 0.03..heights.top,
        )?;
    chart
        .configure_mesh()
        .light_line_style(LIGHT)
        .x_desc("p99 latency, produce to apply (log scale; a message never delivered counts at the run's end)")
        .y_desc("guarantee figure (violations or stale writes)")
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .x_label_formatter(&|x| {
            ticks
                .iter()
                .find(|t| t.0 == *x)
                .map_or_else(|| duration_label(*x), |t| t.1.to_string())
        })
        // The band above the figure's axis has no scale of its own.
        .y_label_formatter(&|y| {
            if *y <= plain_top {
                tick_number(*y)
            } else {
                String::new()
            }
        })
        .draw()?;
    if heights.top > plain_top {
        chart.draw_series(std::iter::once(Rectangle::new(
            [(lo, plain_top), (hi, heights.top)],
            UNDELIVERED_BAND.filled(),
        )))?;
        chart.plotting_area().draw(
            &(EmptyElement::at((lo, heights.top))
                + Text::new(
                    "messages never delivered: above every strategy that delivered all, higher the more were left"
                        .to_string(),
                    (8, 6),
                    TextStyle::from((FAMILY, 14).into_font()).color(&VERMILION),
                )),
        )?;
    }
    // Labels beside their points, moved down or up when they would cover an earlier label or
    // leave the plot.
    let (x_px, y_px) = chart.plotting_area().get_pixel_range();
    let mut placed: Vec<(i32, i32, i32, i32)> = Vec::new();
    for (p, &y) in points.iter().zip(&heights.y) {
        let c = strategy_color(&p.strategy);
        let at = (p.p99_ms.max(floor), y);
        chart.draw_series(std::iter::once(marker(strategy_index(&p.strategy), at, c)))?;
        let label = match &p.verdict {
            Some(v) if p.rank.undelivered > 0 => format!("{}: {v}", p.strategy),
            _ => format!(
                "{} ({} {})",
                p.strategy,
                short_number(p.figure),
                metric(p.guarantee).map_or(p.guarantee.to_string(), |d| d.noun(p.figure))
            ),
        };
        let (px, py) = chart.backend_coord(&at);
        let font = (FAMILY, 14).into_font();
        let w = chart
            .plotting_area()
            .estimate_text_size(&label, &TextStyle::from(font.clone()))
            .map_or(8 * label.chars().count() as i32, |(w, _)| w as i32);
        // Right of the point, or left of it when it would leave the plot, or as far right as it
        // fits when it is too long for either side.
        let dx = if px + 10 + w <= x_px.end {
            10
        } else if px - 10 - w >= x_px.start {
            -10 - w
        } else {
            (x_px.end - w - px).max(x_px.start + 2 - px)
        };
        let mut dy = -8;
        for k in 0..24 {
            let off = if k % 2 == 0 {
                k / 2 * 18
            } else {
                -(k / 2 + 1) * 18
            };
            let b = (px + dx, py - 8 + off, px + dx + w, py + 8 + off);
            let inside = b.1 >= y_px.start && b.3 <= y_px.end;
            if inside
                && placed
                    .iter()
                    .all(|q| b.2 < q.0 || b.0 > q.2 || b.3 < q.1 || b.1 > q.3)
            {
                dy = off - 8;
                placed.push(b);
                break;
            }
        }
        // A label moved off its point's line is tied to it by a thin line.
        if dy != -8 {
            let edge = if dx > 0 { dx } else { dx + w };
            chart.plotting_area().draw(
                &(EmptyElement::at(at)
                    + PathElement::new(vec![(0, 0), (edge, dy + 8)], GREY.mix(0.5))),
            )?;
        }
        chart
            .plotting_area()
            .draw(&(EmptyElement::at(at) + Text::new(label, (dx, dy), font)))?;
    }
    Ok(())
}

/// The time axis's ticks, in ms: decades below a second, then the units a reader counts in (no
/// "16.7min" for 10^6 ms).
const LOG_TIME_TICKS: [(f64, &str); 13] = [
    (0.1, "0.1ms"),
    (1.0, "1ms"),
    (10.0, "10ms"),
    (100.0, "100ms"),
    (1_000.0, "1s"),
    (10_000.0, "10s"),
    (60_000.0, "1min"),
    (600_000.0, "10min"),
    (3_600_000.0, "1h"),
    (36_000_000.0, "10h"),
    (86_400_000.0, "1d"),
    (864_000_000.0, "10d"),
    (8_640_000_000.0, "100d"),
];

/// The calibration chart of one scenario (`sim calibrate`): one panel per metric, one row per
/// strategy; the simulator's min-max as a bar (the accepted, widened interval as a pale band
/// around it, the mean as a tick), each live run as a point (black when within, vermilion when
/// outside).
pub fn calibration_chart(
    title: &str,
    rows: &[crate::calibrate::Row],
) -> Result<Figure, ChartError> {
    let mut metrics: Vec<&str> = Vec::new();
    for r in rows {
        if !metrics.contains(&r.metric.as_str()) {
            metrics.push(&r.metric);
        }
    }
    let mut strategies: Vec<&str> = Vec::new();
    for r in rows {
        if !strategies.contains(&r.strategy.as_str()) {
            strategies.push(&r.strategy);
        }
    }
    let cols = 3usize;
    let grid_rows = metrics.len().div_ceil(cols).max(1);
    let panel_h = 90 + 50 * strategies.len().max(1) as u32;
    let size = (1500, 60 + 40 + grid_rows as u32 * panel_h);
    struct CalChart<'a> {
        title: &'a str,
        rows: &'a [crate::calibrate::Row],
        metrics: Vec<&'a str>,
        strategies: Vec<&'a str>,
        cols: usize,
    }
    impl Draw for CalChart<'_> {
        fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Drawn<DB> {
            let area = root.titled(self.title, (FAMILY, 24))?;
            let (w, h) = area.dim_in_pixel();
            let (grid, legend) = area.split_vertically(h.saturating_sub(40));
            let n = self.metrics.len().div_ceil(self.cols).max(1);
            for (cell, metric) in grid.split_evenly((n, self.cols)).iter().zip(&self.metrics) {
                draw_calibration_panel(cell, self.rows, metric, &self.strategies)?;
            }
            let y = 18;
            let mut x = w as i32 / 2 - 330;
            legend.draw(&Rectangle::new(
                [(x, y - 7), (x + 30, y + 7)],
                CAL_BAND.filled(),
            ))?;
            legend.draw(&Text::new(
                "accepted".to_string(),
                (x + 36, y - 8),
                (FAMILY, 15),
            ))?;
            x += 130;
            legend.draw(&Rectangle::new(
                [(x, y - 7), (x + 30, y + 7)],
                BLUE_.filled(),
            ))?;
            legend.draw(&Text::new(
                "simulator min-max (| mean)".to_string(),
                (x + 36, y - 8),
                (FAMILY, 15),
            ))?;
            x += 250;
            legend.draw(&Circle::new((x + 6, y), 5, INK.filled()))?;
            legend.draw(&Text::new(
                "live, within".to_string(),
                (x + 16, y - 8),
                (FAMILY, 15),
            ))?;
            x += 120;
            legend.draw(&Circle::new((x + 6, y), 5, VERMILION.filled()))?;
            legend.draw(&Text::new(
                "live, outside".to_string(),
                (x + 16, y - 8),
                (FAMILY, 15),
            ))?;
            Ok(())
        }
    }
    render(
        size,
        &CalChart {
            title,
            rows,
            metrics,
            strategies,
            cols,
        },
    )
}

/// The accepted band of the calibration chart.
const CAL_BAND: RGBColor = RGBColor(205, 228, 245);

fn draw_calibration_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    rows: &[crate::calibrate::Row],
    metric: &str,
    strategies: &[&str],
) -> Drawn<DB> {
    let n = strategies.len().max(1);
    let of = |s: &str| rows.iter().find(|r| r.metric == metric && r.strategy == s);
    let finite = |x: f64| if x.is_finite() { x } else { 0.0 };
    let mut max = 0f64;
    for s in strategies {
        if let Some(r) = of(s) {
            max = max.max(finite(r.high)).max(finite(r.sim.max));
            for v in &r.live {
                max = max.max(finite(*v));
            }
        }
    }
    let x_max = if max > 0.0 { max * 1.08 } else { 1.0 };
    let unit = metric_unit(metric);
    let area = area.margin(8, 0, 0, 0).titled(metric, (FAMILY, 18))?;
    let mut chart = ChartBuilder::on(&area)
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(130)
        .build_cartesian_2d(0f64..x_max, (0..n).into_segmented())?;
    let y_of = |i: usize| n - 1 - i;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(y) if *y < n => strategies[n - 1 - *y].to_string(),
            _ => String::new(),
        })
        .x_label_formatter(&|x| tick_number(*x))
        .x_labels(6)
        .x_desc(unit)
        .light_line_style(LIGHT)
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 13))
        .draw()?;
    for (i, s) in strategies.iter().enumerate() {
        let Some(r) = of(s) else { continue };
        let y0 = SegmentValue::Exact(y_of(i));
        let y1 = SegmentValue::Exact(y_of(i) + 1);
        let mut band = Rectangle::new(
            [(finite(r.low), y0.clone()), (finite(r.high), y1.clone())],
            CAL_BAND.filled(),
        );
        band.set_margin(4, 4, 0, 0);
        chart.draw_series(std::iter::once(band))?;
        // A zero-width range still shows as a thin bar.
        let (lo, hi) = (finite(r.sim.min), finite(r.sim.max));
        let hi = if hi - lo < x_max * 0.004 {
            lo + x_max * 0.004
        } else {
            hi
        };
        let mut bar = Rectangle::new([(lo, y0.clone()), (hi, y1.clone())], BLUE_.filled());
        bar.set_margin(14, 14, 0, 0);
        chart.draw_series(std::iter::once(bar))?;
        let mut tick = Rectangle::new(
            [
                (finite(r.sim.mean) - x_max * 0.002, y0),
                (finite(r.sim.mean) + x_max * 0.002, y1),
            ],
            INK.filled(),
        );
        tick.set_margin(10, 10, 0, 0);
        chart.draw_series(std::iter::once(tick))?;
        let points = r.live.iter().map(|v| {
            let c = if crate::calibrate::inside(*v, r.low, r.high) {
                INK
            } else {
                VERMILION
            };
            Circle::new((finite(*v), SegmentValue::CenterOf(y_of(i))), 5, c.filled())
        });
        chart.draw_series(points)?;
    }
    Ok(())
}

fn metric_unit(path: &str) -> &'static str {
    metric(path).map(|d| d.unit).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No two strategies share a colour, and no two strategies or composed pairs share the
    /// (colour, marker) pair: a line hidden under another, or a colour a reader cannot tell
    /// apart, still leaves the shape.
    #[test]
    fn every_strategy_has_its_own_colour_and_its_own_marker() {
        let base: Vec<&str> = strategies::ALL.iter().map(|s| s.name).collect();
        let pairs = strategies::compose::pairs();
        let style = |name: &str| {
            let c = strategy_color(name);
            let shape = marker(strategy_index(name), (0, 0), BLACK).shape;
            ((c.0, c.1, c.2), shape)
        };
        let mut colours: Vec<_> = base.iter().map(|s| style(s).0).collect();
        colours.sort();
        colours.dedup();
        assert_eq!(
            colours.len(),
            base.len(),
            "a registry strategy's colour repeats"
        );
        let mut styles: Vec<_> = base
            .iter()
            .copied()
            .chain(pairs.iter().map(String::as_str))
            .map(style)
            .collect();
        styles.sort();
        styles.dedup();
        assert_eq!(styles.len(), base.len() + pairs.len());
        // A composed pair is drawn in its own style, not the fallback's.
        assert_ne!(style(&pairs[0]), style("no such strategy"));
        // ... and never in the colour of either of its parts.
        for p in &pairs {
            let (d, h) = p.split_once('+').unwrap();
            assert_ne!(style(p).0, style(d).0, "{p} and {d}");
            assert_ne!(style(p).0, style(h).0, "{p} and {h}");
        }
    }

    fn summary_with(values: &[(&str, u64, f64)]) -> RunSummary {
        RunSummary {
            scenario: "t".into(),
            seed: 1,
            strategies: values
                .iter()
                .map(|&(name, violations, p99)| sim::StrategySummary {
                    strategy: name.into(),
                    status: Status::Ok,
                    reason: None,
                    valid: None,
                    verdict: None,
                    metrics: Some(Metrics {
                        ordering_violations: violations,
                        latency_ms: sim::summary::Latency {
                            p50: p99 / 2.0,
                            p99,
                            max: p99,
                        },
                        ..Metrics::default()
                    }),
                    params: Default::default(),
                })
                .collect(),
        }
    }

    /// The cost chart places every strategy that ran, labelled with its guarantee figure, and
    /// renders the same bytes twice.
    #[test]
    fn the_cost_chart_names_each_strategy_with_its_guarantee_figure() {
        let s = summary_with(&[("competing", 70, 40.0), ("unit_of_order", 0, 51_000.0)]);
        let a = cost_chart(&s).unwrap();
        assert!(
            a.svg.contains("competing (70 ordering violations)"),
            "{}",
            a.svg
        );
        assert!(a.svg.contains("unit_of_order (0 ordering violations)"));
        let b = cost_chart(&s).unwrap();
        assert!(a.svg == b.svg && a.png == b.png);
    }

    proptest::proptest! {
        /// On the cost chart a strategy that delivered nothing is drawn above (worse than) every
        /// strategy that delivered everything, whatever their figures; and among those that left
        /// messages undelivered, more left is higher.
        #[test]
        fn not_delivering_is_never_drawn_below_delivering(
            runs in proptest::collection::vec(
                (0u64..3, 0u64..100_000, 0.0f64..1e7),
                1..12,
            )
        ) {
            use sim::verdict::Rank;
            let ranks: Vec<Rank> = runs
                .iter()
                .map(|&(u, figure, p99_ms)| Rank {
                    // 0: delivered everything; else some or all undelivered.
                    undelivered: [0, 1, 30_000][u as usize],
                    figure: figure as f64,
                    p99_ms,
                })
                .collect();
            let h = cost_heights(&ranks);
            for (i, a) in ranks.iter().enumerate() {
                for (j, b) in ranks.iter().enumerate() {
                    if a.undelivered > b.undelivered {
                        proptest::prop_assert!(h.y[i] > h.y[j], "{ranks:?} -> {h:?}");
                    }
                }
                if a.undelivered > 0 {
                    proptest::prop_assert!(h.y[i] > h.plain_top && h.y[i] < h.top);
                } else {
                    proptest::prop_assert!(h.y[i] <= h.plain_top);
                }
            }
        }
    }

    /// The cost chart labels a strategy that left messages undelivered with its verdict, in the
    /// band above the others; bar labels write durations in their own unit.
    #[test]
    fn the_charts_show_the_verdicts_and_what_was_never_delivered() {
        let mut s = summary_with(&[("competing", 70, 40.0), ("unit_of_order", 0, 51_000.0)]);
        let m = s.strategies[1].metrics.as_mut().unwrap();
        (m.produced, m.applied, m.pending_at_end, m.undelivered) = (30_000, 15_565, 14_435, 14_435);
        s.strategies = s
            .strategies
            .into_iter()
            .map(|st| st.judged("ordering_violations"))
            .collect();
        let cost = cost_chart(&s).unwrap();
        assert!(
            cost.svg.contains(
                "unit_of_order: FAIL: 14,435 of 30,000 never delivered (pending at the end)"
            ),
            "{}",
            cost.svg
        );
        assert!(cost
            .svg
            .contains("messages never delivered: above every strategy"));
        let run = run_chart(&s).unwrap();
        assert!(run
            .svg
            .contains("✗ competing: FAIL: 70 ordering violations"));
        assert!(run.svg.contains("✗ unit_of_order: FAIL: 14,435 of 30,000"));
        assert!(run.svg.contains("\nNever delivered\n"), "the last panel");
        // p99 40ms beside 51s: the axis is in seconds, the short bar's label still says 40ms.
        assert!(run.svg.contains(" 40ms"), "{}", run.svg);
        // The latency of the run that left messages undelivered is a lower bound.
        assert!(run.svg.contains(" ≥51s"), "{}", run.svg);
        // A short count axis has whole ticks only: the all-zero panels run from 0 to 1 with no
        // tick at a fraction of a message.
        for tick in [">\n0.2\n<", ">\n0.5\n<"] {
            assert!(!run.svg.contains(tick), "{tick} in {}", run.svg);
        }
    }

    /// A run-chart panel whose bars are all zero says so in its title.
    #[test]
    fn an_all_zero_panel_says_so() {
        let s = summary_with(&[("competing", 3, 40.0), ("single", 0, 50.0)]);
        let fig = run_chart(&s).unwrap();
        assert!(fig.svg.contains("Lost + duplicates: all zero"));
        assert!(
            fig.svg.contains("\nOrdering violations\n"),
            "a panel with data keeps its title"
        );
    }
}
