//! Drawing a [`Screen`] with ratatui, and the keys.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};
use ratatui::Frame;

use crate::app::{Screen, Status};
use crate::view::{
    count, duration, quantity, FigureGroup, GroupRow, HistogramRow, ProcessList, ProcessRow, View,
    WorkerRow,
};

/// Whether a key quits: `q`, `Esc` or `Ctrl-C` (the terminal is in raw
/// mode, so `Ctrl-C` arrives as a key).
///
/// # Examples
///
/// ```
/// use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
///
/// assert!(sched_top::ui::quits(&KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE)));
/// assert!(!sched_top::ui::quits(&KeyEvent::new(KeyCode::Char('x'), KeyModifiers::NONE)));
/// ```
pub fn quits(key: &KeyEvent) -> bool {
    if key.kind == KeyEventKind::Release {
        return false;
    }
    match key.code {
        KeyCode::Char('q') | KeyCode::Esc => true,
        KeyCode::Char('c') => key.modifiers.contains(KeyModifiers::CONTROL),
        _ => false,
    }
}

/// Draws the whole screen: the header, the workers (above the groups,
/// when the engine has more than the default one) beside the histograms,
/// the figures of other libraries when the endpoint serves some (a panel
/// per source, three to a row), and the three top lists side by side.
///
/// # Examples
///
/// See the [crate]'s example.
pub fn render(frame: &mut Frame, screen: &Screen) {
    let area = frame.area();
    let workers = screen.view.as_ref().map_or(1, |v| v.workers.len());
    let histograms = screen
        .view
        .as_ref()
        .and_then(|v| v.histograms.as_ref())
        .map_or(1, |h| h.len());
    let groups = screen.view.as_ref().map_or(0, |v| shown_groups(v).len());
    let left = workers + 3 + if groups > 0 { groups + 3 } else { 0 };
    let middle = (left.max(histograms + 3) as u16).min(area.height / 2);
    let figures = screen.view.as_ref().map_or(&[][..], |v| &v.figures[..]);
    let band = (figures_height(figures) as u16).min(area.height / 3);
    let [header, middle, band, bottom] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Length(middle.max(4)),
        Constraint::Length(band),
        Constraint::Min(4),
    ])
    .areas(area);
    render_header(frame, header, screen);
    let Some(view) = &screen.view else {
        let waiting = Paragraph::new("waiting for the first snapshot")
            .block(Block::bordered().title(" sched-top "));
        frame.render_widget(waiting, middle.union(bottom));
        return;
    };
    let [left, histograms_area] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(middle);
    let groups = shown_groups(view);
    if groups.is_empty() {
        render_workers(frame, left, &view.workers);
    } else {
        let [workers_area, groups_area] = Layout::vertical([
            Constraint::Length(view.workers.len() as u16 + 3),
            Constraint::Min(3),
        ])
        .areas(left);
        render_workers(frame, workers_area, &view.workers);
        render_groups(frame, groups_area, groups);
    }
    render_histograms(frame, histograms_area, view.histograms.as_deref());
    render_figures(frame, band, &view.figures);
    let [steps, mailbox, long] = Layout::horizontal([
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
    ])
    .areas(bottom);
    render_top_by_steps(frame, steps, view);
    render_top_by_mailbox(frame, mailbox, &view.by_mailbox);
    render_top_by_long_steps(frame, long, &view.by_long_steps);
}

/// The groups the screen shows: none when the engine has only the default
/// group (there is nothing to share), all of them otherwise.
fn shown_groups(view: &View) -> &[GroupRow] {
    if view.groups.len() > 1 {
        &view.groups
    } else {
        &[]
    }
}

/// How many sources' panels share a row: as many as top lists below.
const FIGURE_PANELS_PER_ROW: usize = 3;

/// The height of the figures' panels: for each row of them, its longest
/// panel's figures plus borders and heading; zero without figures.
fn figures_height(groups: &[FigureGroup]) -> usize {
    groups
        .chunks(FIGURE_PANELS_PER_ROW)
        .map(|row| row.iter().map(|g| g.rows.len()).max().unwrap_or(0) + 3)
        .sum()
}

fn render_figures(frame: &mut Frame, area: Rect, groups: &[FigureGroup]) {
    if groups.is_empty() || area.height == 0 {
        return;
    }
    let rows: Vec<&[FigureGroup]> = groups.chunks(FIGURE_PANELS_PER_ROW).collect();
    let heights = rows
        .iter()
        .map(|row| Constraint::Length(figures_height(row) as u16));
    let bands = Layout::vertical(heights).split(area);
    for (row, band) in rows.iter().zip(bands.iter()) {
        let columns = Layout::horizontal(
            [Constraint::Ratio(1, FIGURE_PANELS_PER_ROW as u32); FIGURE_PANELS_PER_ROW],
        )
        .split(*band);
        for (group, column) in row.iter().zip(columns.iter()) {
            render_figure_group(frame, *column, group);
        }
    }
}

/// One source's panel: each figure's value in its unit, and a counter's
/// growth per second.
fn render_figure_group(frame: &mut Frame, area: Rect, group: &FigureGroup) {
    let rows = group.rows.iter().map(|f| {
        Row::new(vec![
            Cell::from(f.name.clone()),
            right(quantity(f.value, f.unit)),
            right(f.per_sec.map_or_else(String::new, |r| quantity(r, f.unit))),
        ])
    });
    let title = if group.source.is_empty() {
        " figures ".to_string()
    } else {
        format!(" {} ", group.source)
    };
    let table = Table::new(
        rows,
        [
            Constraint::Fill(1),
            Constraint::Length(8),
            Constraint::Length(8),
        ],
    )
    .header(header_row(["figure", "value", "per s"], 1))
    .block(Block::bordered().title(title));
    frame.render_widget(table, area);
}

fn bold() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}

fn right(text: String) -> Cell<'static> {
    Cell::from(Line::from(text).right_aligned())
}

fn header_row<const N: usize>(names: [&'static str; N], right_from: usize) -> Row<'static> {
    Row::new(names.into_iter().enumerate().map(|(i, name)| {
        if i >= right_from {
            Cell::from(Line::from(name).right_aligned())
        } else {
            Cell::from(name)
        }
    }))
    .style(bold().fg(Color::Yellow))
}

fn render_header(frame: &mut Frame, area: Rect, screen: &Screen) {
    let status = match &screen.status {
        Status::Connected => Span::from(screen.status.to_string()).green(),
        Status::Connecting => Span::from(screen.status.to_string()).yellow(),
        Status::Disconnected(_) => Span::from(screen.status.to_string()).red().bold(),
    };
    let first = Line::from(vec![
        Span::from(screen.addr.clone()).bold(),
        Span::from("  "),
        status,
        Span::from(format!(
            "  refresh {} ms  (q quits)",
            screen.interval.as_millis()
        )),
    ]);
    let second = match &screen.view {
        Some(view) => {
            let h = &view.header;
            Line::from(format!(
                "up {}  processes {}  workers {} ({} parked)  steps/s {}  global queue {}  timers {}  dead letters {}  long steps {}",
                duration(h.uptime),
                h.live_processes,
                h.workers,
                h.parked_workers,
                count(h.steps_per_sec),
                h.global_queue_len,
                h.pending_timers,
                h.dead_letters,
                h.long_steps,
            ))
        }
        None => Line::from("no snapshot yet"),
    };
    let stale = matches!(screen.status, Status::Disconnected(_)) && screen.view.is_some();
    let title = if stale {
        " sched-top (figures below are from before the disconnection) "
    } else {
        " sched-top "
    };
    let header = Paragraph::new(vec![first, second]).block(Block::bordered().title(title));
    frame.render_widget(header, area);
}

fn pct(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.0}%"))
}

fn render_workers(frame: &mut Frame, area: Rect, workers: &[WorkerRow]) {
    let rows = workers.iter().map(|w| {
        Row::new(vec![
            Cell::from(w.index.to_string()),
            right(pct(w.busy_pct)),
            right(count(w.steps_per_sec)),
            right(w.local_queue_len.to_string()),
            right(count(w.parks_per_sec)),
            right(w.stolen.to_string()),
            right(w.steps.to_string()),
        ])
    });
    let table = Table::new(
        rows,
        [
            Constraint::Length(6),
            Constraint::Length(6),
            Constraint::Length(8),
            Constraint::Length(6),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Fill(1),
        ],
    )
    .header(header_row(
        [
            "worker", "busy", "steps/s", "queue", "parks/s", "stolen", "steps",
        ],
        1,
    ))
    .block(Block::bordered().title(" workers "));
    frame.render_widget(table, area);
}

fn render_groups(frame: &mut Frame, area: Rect, groups: &[GroupRow]) {
    // The schedule latency's column only when the engine reports it
    // (histograms on), so that a narrow panel spends no room on dashes.
    let latency = groups.iter().any(|g| g.schedule_p99.is_some());
    let rows = groups.iter().map(|g| {
        let mut cells = vec![
            Cell::from(g.name.clone()),
            right(g.weight.to_string()),
            right(pct(g.busy_pct)),
            right(g.ready.to_string()),
        ];
        if latency {
            cells.push(right(
                g.schedule_p99.map_or_else(|| "-".to_string(), duration),
            ));
        }
        Row::new(cells)
    });
    let mut widths = vec![
        Constraint::Fill(1),
        Constraint::Length(6),
        Constraint::Length(10),
        Constraint::Length(8),
    ];
    let header = if latency {
        widths.push(Constraint::Length(10));
        header_row(["group", "weight", "busy share", "ready", "sched p99"], 1)
    } else {
        header_row(["group", "weight", "busy share", "ready"], 1)
    };
    let table = Table::new(rows, widths)
        .header(header)
        .block(Block::bordered().title(" groups "));
    frame.render_widget(table, area);
}

fn render_histograms(frame: &mut Frame, area: Rect, histograms: Option<&[HistogramRow]>) {
    let block = Block::bordered().title(" histograms ");
    let Some(histograms) = histograms else {
        let off = Paragraph::new(vec![
            Line::from("histograms off"),
            Line::from("(Scheduler::builder().histograms(true))").dim(),
        ])
        .block(block);
        frame.render_widget(off, area);
        return;
    };
    let rows = histograms.iter().map(|h| {
        Row::new(vec![
            Cell::from(h.name.clone()),
            right(count(Some(h.count as f64))),
            right(duration(h.p50)),
            right(duration(h.p90)),
            right(duration(h.p99)),
            right(duration(h.max)),
        ])
    });
    let table = Table::new(
        rows,
        [
            Constraint::Fill(1),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(7),
        ],
    )
    .header(header_row(
        ["histogram", "count", "p50", "p90", "p99", "max"],
        1,
    ))
    .block(block);
    frame.render_widget(table, area);
}

/// A top list's table: pid, name, and two columns of figures.
fn render_process_table<const N: usize>(
    frame: &mut Frame,
    area: Rect,
    title: &str,
    list: &ProcessList,
    columns: [&'static str; N],
    cells: impl Fn(&ProcessRow) -> [String; 2],
    empty: &str,
) {
    let block = Block::bordered().title(format!(" {title} "));
    let rows = match list {
        ProcessList::NotReported => {
            let text = Paragraph::new("not reported by this engine")
                .dim()
                .block(block);
            frame.render_widget(text, area);
            return;
        }
        ProcessList::Rows(rows) if rows.is_empty() => {
            frame.render_widget(Paragraph::new(empty.to_string()).block(block), area);
            return;
        }
        ProcessList::Rows(rows) => rows,
    };
    let table_rows = rows.iter().map(|p| {
        let [a, b] = cells(p);
        Row::new(vec![
            Cell::from(p.pid.clone()),
            Cell::from(p.name.clone()),
            right(a),
            right(b),
        ])
    });
    let table = Table::new(
        table_rows,
        [
            Constraint::Length(8),
            Constraint::Fill(1),
            Constraint::Length(8),
            Constraint::Length(9),
        ],
    )
    .header(header_row(columns, 2))
    .block(block);
    frame.render_widget(table, area);
}

fn render_top_by_steps(frame: &mut Frame, area: Rect, view: &View) {
    let rated = match &view.by_steps {
        ProcessList::Rows(rows) => rows.iter().any(|r| r.steps_per_sec.is_some()),
        ProcessList::NotReported => false,
    };
    if rated {
        render_process_table(
            frame,
            area,
            "top by steps/s",
            &view.by_steps,
            ["pid", "name", "steps/s", "state"],
            |p| [count(p.steps_per_sec), p.state.clone()],
            "no process",
        );
    } else {
        render_process_table(
            frame,
            area,
            "top by steps",
            &view.by_steps,
            ["pid", "name", "steps", "state"],
            |p| [count(Some(p.steps as f64)), p.state.clone()],
            "no process",
        );
    }
}

fn render_top_by_mailbox(frame: &mut Frame, area: Rect, list: &ProcessList) {
    render_process_table(
        frame,
        area,
        "top by mailbox depth",
        list,
        ["pid", "name", "mailbox", "last step"],
        |p| {
            [
                count(p.mailbox_depth.map(f64::from)),
                p.since_last_step.map_or_else(|| "-".into(), duration),
            ]
        },
        "every mailbox is empty",
    );
}

fn render_top_by_long_steps(frame: &mut Frame, area: Rect, list: &ProcessList) {
    render_process_table(
        frame,
        area,
        "top by long steps",
        list,
        ["pid", "name", "long", "steps"],
        |p| {
            [
                count(p.long_steps.map(f64::from)),
                count(Some(p.steps as f64)),
            ]
        },
        "no long steps",
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::App;
    use crate::fetch::Update;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    use sched::live::{
        Figure, GroupSnapshot, HistogramSummary, ProcessEntry, Snapshot, Unit, WorkerSnapshot,
    };
    use std::time::Duration;

    fn text(terminal: &Terminal<TestBackend>) -> String {
        let buffer = terminal.backend().buffer();
        let width = buffer.area.width as usize;
        buffer
            .content
            .chunks(width)
            .map(|line| line.iter().map(|c| c.symbol()).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn draw(app: &App) -> String {
        let mut terminal = Terminal::new(TestBackend::new(120, 30)).unwrap();
        terminal.draw(|frame| render(frame, &app.screen)).unwrap();
        text(&terminal)
    }

    fn entry(pid: &str, name: &str, steps: u64, recent: u64) -> ProcessEntry {
        let mut e = ProcessEntry::default();
        e.pid = pid.into();
        e.names = vec![name.into()];
        e.state = "idle".into();
        e.steps = steps;
        e.recent_steps = recent;
        e
    }

    fn snapshot(elapsed_ms: u64, steps: [u64; 2]) -> Box<Snapshot> {
        let mut s = Snapshot::default();
        s.version = sched::live::VERSION;
        s.elapsed_ns = elapsed_ms * 1_000_000;
        for n in steps {
            let mut w = WorkerSnapshot::default();
            w.steps = n;
            w.parks = n / 10;
            w.busy_ns = Some(elapsed_ms * 250_000); // a quarter of the time
            w.local_queue_len = 4;
            s.workers.push(w);
        }
        s.live_processes = 22;
        s.long_steps = 3;
        let mut step = HistogramSummary::default();
        step.name = "step".into();
        step.count = 62_307;
        step.p50_ns = 20_479;
        step.p90_ns = 163_839;
        step.p99_ns = 163_839;
        step.max_ns = 40_122_123;
        s.histograms = Some(vec![step]);
        s.top_by_steps = vec![
            entry("<0.1>", "hot-1", 9_000, 7_000),
            entry("<0.2>", "hot-2", 5_000, 3_500),
        ];
        s.reports_mailbox_depth = true;
        let mut backlog = entry("<0.21>", "backlog", 319, 1);
        backlog.mailbox_depth = Some(4_321);
        backlog.since_last_step_ns = Some(2_000_000);
        s.top_by_mailbox = vec![backlog];
        s.reports_long_steps = false;
        Box::new(s)
    }

    #[test]
    fn it_draws_every_panel_with_its_figures() {
        let mut app = App::new("127.0.0.1:7207".into(), Duration::from_millis(500));
        app.update(Update::Snapshot(snapshot(1_000, [1_000, 2_000])));
        app.update(Update::Snapshot(snapshot(2_000, [3_000, 2_500])));
        let screen = draw(&app);
        println!("{screen}");
        assert!(
            screen.contains("127.0.0.1:7207  connected  refresh 500 ms"),
            "{screen}"
        );
        assert!(
            screen.contains("processes 22  workers 2 (0 parked)  steps/s 2500"),
            "{screen}"
        );
        assert!(screen.contains("long steps 3"), "{screen}");
        // Workers: busy 25%, 2000 and 500 steps/s, queue 4, 200 and 50 parks/s.
        let worker0 = screen.lines().find(|l| l.contains("│0 ")).expect(&screen);
        assert!(
            worker0.contains("25%") && worker0.contains("2000") && worker0.contains("200"),
            "{worker0}"
        );
        let worker1 = screen.lines().find(|l| l.contains("│1 ")).expect(&screen);
        assert!(
            worker1.contains("500") && worker1.contains("50"),
            "{worker1}"
        );
        // The histogram with its quantiles.
        let step = screen.lines().find(|l| l.contains("step ")).expect(&screen);
        for figure in ["62.3k", "20.5µs", "164µs", "40.1ms"] {
            assert!(step.contains(figure), "{figure} in {step}");
        }
        // The three lists.
        assert!(screen.contains("top by steps/s"), "{screen}");
        let hot = screen.lines().find(|l| l.contains("hot-1")).expect(&screen);
        assert!(hot.contains("<0.1>") && hot.contains("7000"), "{hot}");
        let backlog = screen
            .lines()
            .find(|l| l.contains("backlog"))
            .expect(&screen);
        assert!(
            backlog.contains("4321") && backlog.contains("2.00ms"),
            "{backlog}"
        );
        assert!(screen.contains("not reported by this engine"), "{screen}");
    }

    fn group(name: &str, weight: u32, ready: u64, busy_ns: Option<u64>) -> GroupSnapshot {
        let mut g = GroupSnapshot::default();
        g.name = name.into();
        g.weight = weight;
        g.ready = ready;
        g.busy_ns = busy_ns;
        g
    }

    #[test]
    fn groups_have_a_panel_when_there_are_several() {
        let mut app = App::new("127.0.0.1:7207".into(), Duration::from_millis(500));
        let mut before = snapshot(1_000, [1_000, 2_000]);
        before.groups = vec![
            group("default", 1, 0, Some(0)),
            group("tenant-a", 3, 0, Some(100_000_000)),
        ];
        let mut after = snapshot(2_000, [3_000, 2_500]);
        after.groups = vec![
            group("default", 1, 2, Some(100_000_000)),
            group("tenant-a", 3, 17, Some(400_000_000)),
        ];
        app.update(Update::Snapshot(before));
        app.update(Update::Snapshot(after));
        let screen = draw(&app);
        println!("{screen}");
        assert!(screen.contains(" groups "), "{screen}");
        let heading = screen
            .lines()
            .find(|l| l.contains("busy share"))
            .expect(&screen);
        assert!(
            heading.contains("group") && heading.contains("weight") && heading.contains("ready"),
            "{heading}"
        );
        // 100 and 300 ms of steps: shares of 25% and 75%.
        let default = screen
            .lines()
            .find(|l| l.contains("│default "))
            .expect(&screen);
        assert!(
            default.contains("25%") && default.contains(" 2"),
            "{default}"
        );
        let tenant = screen
            .lines()
            .find(|l| l.contains("│tenant-a "))
            .expect(&screen);
        for figure in [" 3 ", "75%", " 17"] {
            assert!(tenant.contains(figure), "{figure} in {tenant}");
        }
        // The other panels are all there.
        for panel in [
            " workers ",
            " histograms ",
            "top by steps/s",
            "top by long steps",
        ] {
            assert!(screen.contains(panel), "{panel} in {screen}");
        }
        assert!(screen.lines().any(|l| l.contains("│1 ")), "{screen}");
        // Histograms off: no schedule latency column.
        assert!(!screen.contains("sched p99"), "{screen}");

        // With histograms on, each group's schedule latency p99.
        let mut app = App::new("127.0.0.1:7207".into(), Duration::from_millis(500));
        let latency = |p99_ns: u64| {
            let mut h = HistogramSummary::default();
            h.name = "schedule_latency".into();
            h.count = 10;
            h.p99_ns = p99_ns;
            Some(h)
        };
        let mut measured = snapshot(1_000, [1_000, 2_000]);
        measured.groups = vec![
            group("default", 1, 0, Some(0)),
            group("tenant-a", 3, 0, Some(100_000_000)),
        ];
        measured.groups[0].schedule_latency = latency(12_300);
        measured.groups[1].schedule_latency = latency(4_100_000);
        app.update(Update::Snapshot(measured));
        let screen = draw(&app);
        let heading = screen
            .lines()
            .find(|l| l.contains("busy share"))
            .expect(&screen);
        assert!(heading.contains("sched p99"), "{heading}");
        let default = screen
            .lines()
            .find(|l| l.contains("│default "))
            .expect(&screen);
        assert!(default.contains("12.3µs"), "{default}");
        let tenant = screen
            .lines()
            .find(|l| l.contains("│tenant-a "))
            .expect(&screen);
        assert!(tenant.contains("4.10ms"), "{tenant}");

        // The default group alone: no panel.
        let mut app = App::new("127.0.0.1:7207".into(), Duration::from_millis(500));
        for (ms, steps) in [(1_000, [1_000, 2_000]), (2_000, [3_000, 2_500])] {
            let mut alone = snapshot(ms, steps);
            alone.groups = vec![group("default", 1, 4, None)];
            app.update(Update::Snapshot(alone));
        }
        let screen = draw(&app);
        assert!(!screen.contains(" groups "), "{screen}");
        assert!(!screen.contains("busy share"), "{screen}");
        assert!(!screen.contains("│default"), "{screen}");
    }

    fn journal(records: f64, bytes: f64) -> Vec<Figure> {
        vec![
            Figure::counter("journal", "records", records, Unit::Count),
            Figure::counter("journal", "bytes", bytes, Unit::Bytes),
            Figure::counter("journal", "syncs", 40.0, Unit::Count),
            Figure::gauge("journal", "sync p99", 0.0042, Unit::Seconds),
            Figure::gauge("journal", "step-to-durable p99", 0.0061, Unit::Seconds),
            Figure::gauge("journal", "running", 12.0, Unit::Count),
            Figure::gauge("journal", "store size", 1_572_864.0, Unit::Bytes),
            Figure::gauge("relay", "queued", 3.0, Unit::Count),
        ]
    }

    /// The row of `screen` that holds `name` in the panel titled `title`
    /// (the panel's columns only).
    fn panel_row(screen: &str, title: &str, name: &str) -> String {
        let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
        let (top, left) = lines
            .iter()
            .enumerate()
            .find_map(|(i, l)| {
                let text: String = l.iter().collect();
                let at = text.find(&format!("┌ {title} "))?;
                Some((i, text[..at].chars().count()))
            })
            .unwrap_or_else(|| panic!("no panel {title:?} in\n{screen}"));
        let width = lines[top][left + 1..]
            .iter()
            .position(|&c| c == '┐')
            .expect("the panel's corner")
            + 2;
        lines[top + 1..]
            .iter()
            .map(|l| l.iter().skip(left).take(width).collect::<String>())
            .take_while(|l| !l.starts_with('└'))
            .find(|l| l.starts_with(&format!("│{name} ")))
            .unwrap_or_else(|| panic!("no {name:?} in panel {title:?}:\n{screen}"))
    }

    #[test]
    fn figures_of_other_libraries_have_a_panel_per_source() {
        let mut app = App::new("127.0.0.1:7207".into(), Duration::from_millis(500));
        let mut before = snapshot(1_000, [1_000, 2_000]);
        before.figures = journal(1_000.0, 1_048_576.0);
        let mut after = snapshot(2_000, [3_000, 2_500]);
        after.figures = journal(1_950.0, 2_097_152.0);
        app.update(Update::Snapshot(before));
        app.update(Update::Snapshot(after));
        let screen = draw(&app);
        println!("{screen}");

        let heading = panel_row(&screen, "journal", "figure");
        assert!(
            heading.contains("value") && heading.contains("per s"),
            "{heading}"
        );
        // Counters with their value and rate, in their units.
        let records = panel_row(&screen, "journal", "records");
        assert!(
            records.contains(" 1950") && records.contains(" 950"),
            "{records}"
        );
        let bytes = panel_row(&screen, "journal", "bytes");
        assert!(
            bytes.contains("2.00MiB") && bytes.contains("1.00MiB"),
            "{bytes}"
        );
        // Gauges with their value alone.
        let sync = panel_row(&screen, "journal", "sync p99");
        let (_, after_value) = sync.split_once("4.20ms").expect(&sync);
        assert!(
            after_value.trim_end_matches('│').trim().is_empty(),
            "no rate: {sync}"
        );
        let durable = panel_row(&screen, "journal", "step-to-durable p99");
        assert!(durable.contains("6.10ms"), "{durable}");
        assert!(panel_row(&screen, "journal", "running").contains(" 12"));
        assert!(panel_row(&screen, "journal", "store size").contains("1.50MiB"));
        // Another source, another panel.
        assert!(panel_row(&screen, "relay", "queued").contains(" 3"));
        // The engine's panels are all there, the lists with their rows.
        for panel in [
            " workers ",
            " histograms ",
            "top by steps/s",
            "top by mailbox depth",
            "top by long steps",
        ] {
            assert!(screen.contains(panel), "{panel} in {screen}");
        }
        assert!(screen.contains("hot-2"), "{screen}");

        // Without figures, no such panel.
        let mut plain = App::new("127.0.0.1:7207".into(), Duration::from_millis(500));
        plain.update(Update::Snapshot(snapshot(1_000, [1_000, 2_000])));
        let screen = draw(&plain);
        assert!(!screen.contains("journal"), "{screen}");
        assert!(!screen.contains("per s"), "{screen}");
    }

    #[test]
    fn the_first_snapshot_shows_totals_and_a_disconnection_says_so() {
        let mut app = App::new("127.0.0.1:7207".into(), Duration::from_secs(1));
        let screen = draw(&app);
        assert!(screen.contains("connecting") && screen.contains("waiting for the first snapshot"));

        let mut first = snapshot(1_000, [10, 20]);
        first.histograms = None;
        app.update(Update::Snapshot(first));
        let screen = draw(&app);
        assert!(screen.contains("top by steps "), "{screen}");
        assert!(
            screen.contains("9000"),
            "total steps before a rate: {screen}"
        );
        assert!(screen.contains("histograms off"), "{screen}");

        app.update(Update::Disconnected("connection refused".into()));
        let screen = draw(&app);
        assert!(
            screen.contains("disconnected, retrying (connection refused)"),
            "{screen}"
        );
        assert!(screen.contains("from before the disconnection"), "{screen}");
    }

    #[test]
    fn q_esc_and_ctrl_c_quit() {
        let key = |code, modifiers| KeyEvent::new(code, modifiers);
        assert!(quits(&key(KeyCode::Esc, KeyModifiers::NONE)));
        assert!(quits(&key(KeyCode::Char('c'), KeyModifiers::CONTROL)));
        assert!(!quits(&key(KeyCode::Char('c'), KeyModifiers::NONE)));
        let mut release = key(KeyCode::Char('q'), KeyModifiers::NONE);
        release.kind = KeyEventKind::Release;
        assert!(!quits(&release));
    }
}
