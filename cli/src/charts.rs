//! Comparison charts with plotters. One drawing function per chart feeds both backends (SVG and PNG),
//! and every text is set in DejaVu Sans embedded in the binary, so charts render the same bytes on a
//! fresh machine with no system font library.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{register_font, FontStyle};
use sim::summary::{Metrics, RunSummary, Status};
use std::sync::Once;

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
/// The fine grid: barely there, so the data stands out.
const LIGHT: RGBColor = RGBColor(238, 238, 238);

/// One colour per strategy, by its position in the registry, so a strategy keeps its colour on
/// every chart.
pub fn strategy_color(name: &str) -> RGBColor {
    const PALETTE: [RGBColor; 8] = [GREY, BLUE_, VERMILION, GREEN_, PURPLE, ORANGE, SKY, YELLOW_];
    let i = strategies::ALL
        .iter()
        .position(|s| s.name == name)
        .unwrap_or(PALETTE.len() - 1);
    PALETTE[i % PALETTE.len()]
}

/// A stacked component of a bar panel: its label, colour and value per strategy.
struct Part {
    label: &'static str,
    color: RGBColor,
    value: fn(&Metrics) -> f64,
}

/// A panel of the run chart: one horizontal bar per strategy.
struct Panel {
    title: &'static str,
    unit: &'static str,
    parts: Vec<Part>,
}

fn run_panels() -> Vec<Panel> {
    let p = |label, color, value| Part {
        label,
        color,
        value,
    };
    vec![
        Panel {
            title: "Ordering violations",
            unit: "messages applied after a newer one",
            parts: vec![p("violations", VERMILION, |m| m.ordering_violations as f64)],
        },
        Panel {
            title: "Lost + duplicates",
            unit: "messages",
            parts: vec![
                p("lost", VERMILION, |m| m.lost as f64),
                p("duplicates", ORANGE, |m| m.duplicates as f64),
            ],
        },
        Panel {
            title: "Stale rejected + dead-lettered",
            unit: "messages",
            parts: vec![
                p("stale rejected", PURPLE, |m| m.stale_rejected as f64),
                p("dead-lettered", GREY, |m| m.dead_lettered as f64),
            ],
        },
        Panel {
            title: "Throughput",
            unit: "messages applied per second",
            parts: vec![p("throughput", GREEN_, |m| m.throughput_per_s)],
        },
        Panel {
            title: "p99 latency (produce to apply)",
            unit: "ms",
            parts: vec![p("p99", BLUE_, |m| m.latency_ms.p99)],
        },
        Panel {
            title: "Max head-of-line block",
            unit: "ms",
            parts: vec![p("block", SKY, |m| m.max_block_ms)],
        },
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

/// The run chart: six panels (violations, lost + duplicates, stale + dead-lettered, throughput,
/// p99 latency, head-of-line block), one bar per strategy, the values written at the bars' ends.
pub fn run_chart(s: &RunSummary) -> Result<Figure, ChartError> {
    let n = s.strategies.len().max(1) as u32;
    // Title, legend strip, axis and its description take about 150 pixels; then a bar per row.
    let panel_h = 150 + 30 * n;
    let size = (1500, 60 + 2 * panel_h);
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
    let panels = run_panels();
    for (cell, panel) in area.split_evenly((2, 3)).iter().zip(&panels) {
        draw_bar_panel(cell, s, panel)?;
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
                (Status::Ok, Some(m)) => Some(panel.parts.iter().map(|p| (p.value)(m)).collect()),
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
    let mut unit = panel.unit;
    if unit == "ms" {
        // Hours of outage read better in minutes than as seven-digit milliseconds.
        let (u, div) = duration_scale(max);
        unit = u;
        max /= div;
        for (_, vals) in rows.iter_mut() {
            for v in vals.iter_mut().flatten() {
                *v /= div;
            }
        }
    }
    // Room on the right for the value labels.
    let x_max = if max > 0.0 { max * 1.25 } else { 1.0 };
    // Row 0 at the top.
    let y_of = |i: usize| n - 1 - i;
    let names: Vec<String> = rows.iter().map(|(name, _)| name.clone()).collect();
    // Title, then a strip for the legend of stacked parts (a legend inside the plot would cover
    // bars), then the plot.
    let area = area.margin(8, 0, 0, 0).titled(panel.title, (FAMILY, 20))?;
    let (legend, area) = area.split_vertically(22);
    if panel.parts.len() > 1 {
        let (w, _) = legend.dim_in_pixel();
        let mut x = w as i32 / 2 - 90 * panel.parts.len() as i32;
        for part in &panel.parts {
            legend.draw(&Rectangle::new([(x, 4), (x + 14, 18)], part.color.filled()))?;
            legend.draw(&Text::new(part.label, (x + 20, 4), (FAMILY, 14)))?;
            x += 180;
        }
    }
    let mut chart = ChartBuilder::on(&area)
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(140)
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
        .x_labels(6)
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
    let labels = rows.iter().enumerate().map(|(i, (_, vals))| {
        let text = match vals {
            Some(v) if panel.parts.len() > 1 => v
                .iter()
                .map(|x| short_number(*x))
                .collect::<Vec<_>>()
                .join(" + "),
            Some(v) => short_number(v[0]),
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
    let size = (1500, 70 + 50 + rows * 380);
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
    let area = root.titled(title, (FAMILY, 24))?;
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
            legend.draw(&marker(i, (x0 + 14, y), c))?;
            legend.draw(&Text::new(
                line.strategy.clone(),
                (x0 + 36, y - 9),
                (FAMILY, 16),
            ))?;
        }
    }
    Ok(())
}

/// Marker shapes cycle so lines that coincide stay distinguishable.
fn marker<DB: DrawingBackend, C: Clone + 'static>(
    i: usize,
    at: C,
    color: RGBColor,
) -> DynElement<'static, DB, C> {
    let style: ShapeStyle = color.into();
    match i % 4 {
        0 => Circle::new(at, 5, style.filled()).into_dyn(),
        1 => TriangleMarker::new(at, 6, style.filled()).into_dyn(),
        2 => Cross::new(at, 5, style.stroke_width(2)).into_dyn(),
        _ => Circle::new(at, 5, style.stroke_width(2)).into_dyn(),
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
        mesh.x_labels(8).x_label_formatter(&|v| tick_number(*v));
    } else {
        mesh.x_labels(x.labels.len() * 2 + 1)
            .x_label_formatter(&cat_label)
            .disable_x_mesh();
    }
    mesh.draw()?;
    for (li, line) in scaled.iter().enumerate() {
        let c = strategy_color(&line.strategy);
        let pts: Vec<(f64, f64)> = line
            .points
            .iter()
            .map(|p| (x.position(p.x), p.mean))
            .collect();
        chart.draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?;
        chart.draw_series(line.points.iter().filter_map(|p| {
            let (lo, hi) = p.ci95?;
            let xp = x.position(p.x);
            Some(ErrorBar::new_vertical(
                xp,
                lo,
                (lo + hi) / 2.0,
                hi,
                c.stroke_width(1),
                8,
            ))
        }))?;
        chart.draw_series(pts.iter().map(|p| marker(li, *p, c)))?;
    }
    Ok(())
}
