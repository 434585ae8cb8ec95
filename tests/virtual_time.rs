//! Virtual time: deterministic tests of the scheduler, and property tests
//! of the trigger contract (docs/DESIGN.md, "State word" and "Guarantees")
//! against a small sequential reference model: which iterations run, at
//! which virtual instants.

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::{testing::VirtualScheduler, FireError, Scheduler, Trigger, WeakTrigger};
use proptest::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock};
use std::time::Duration;

/// What a scripted task does on one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Return `Some(µs)`.
    Again(u64),
    /// Return `None`.
    Stop,
    /// Panic (the trigger then stops circulating).
    Panic,
    /// `fire()` its own trigger, then return `Some(1 s)` (ignored: superseded).
    FireSelf,
    /// `fire_after(µs)` its own trigger, then return `Some(1 s)` (ignored).
    FireAfterSelf(u64),
    /// `suspend()` its own trigger, then return `Some(1 s)` (ignored).
    SuspendSelf,
}

/// What the test does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Fire,
    FireAfter(u64),
    /// `fire_at_elapsed`: at this scheduler time (µs), or now if past.
    FireAt(u64),
    Suspend,
    Advance(u64),
    Pause,
    /// `resume`: the delay the last run returned, from now.
    Resume,
    ResumeAfter(u64),
}

/// Marks panics the scripts raise on purpose, so the hook keeps them quiet.
struct Scripted;

fn quiet_scripted_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<Scripted>().is_none() {
                default(info);
            }
        }));
    });
}

/// The sequential reference model of one trigger (docs/DESIGN.md, "State
/// word" and "Guarantees").
#[derive(Debug, Default)]
struct Model {
    now: u64,
    /// The live request: run at this instant (µs), or nothing.
    pending: Option<u64>,
    step: usize,
    runs: Vec<u64>,
    /// `TriggerBuilder::min_interval` (µs; 0: none): no start sooner than
    /// this after the previous start.
    min_interval: u64,
    /// Paused (G17): fires are refused, nothing runs.
    paused: bool,
    /// The delay the last run returned (µs): what `resume` re-arms.
    last_delay: Option<u64>,
    /// Suspended, and not fired since (G6): `resume` re-arms nothing.
    suspended: bool,
}

impl Model {
    fn apply(&mut self, op: Op, script: &[Step]) {
        match op {
            // Refused while paused (G17); a suspend then only cancels the
            // schedule a resume would restore (G6).
            Op::Suspend if self.paused => self.suspended = true,
            Op::Fire | Op::FireAfter(_) | Op::FireAt(_) if self.paused => {}
            Op::Fire => self.fired(self.now),
            Op::FireAfter(d) => self.fired(self.now + d),
            Op::FireAt(t) => self.fired(t.max(self.now)),
            Op::Suspend => {
                self.pending = None;
                self.suspended = true;
            }
            Op::Pause => {
                self.paused = true;
                self.pending = None;
            }
            Op::Resume | Op::ResumeAfter(_) if !self.paused => {}
            Op::Resume => {
                self.paused = false;
                if !self.suspended {
                    self.pending = self.last_delay.map(|d| self.now + d);
                }
            }
            Op::ResumeAfter(d) => {
                self.paused = false;
                self.fired(self.now + d);
            }
            Op::Advance(d) => {
                let target = self.now + d;
                while let Some(at) = self.next_start().filter(|&at| at <= target) {
                    self.now = self.now.max(at);
                    self.run(script);
                }
                self.now = target;
            }
        }
    }

    /// A request for a run at `at` (a fire, or `resume_after`).
    fn fired(&mut self, at: u64) {
        self.pending = Some(at);
        self.suspended = false;
    }

    /// When the live request runs: its instant, or the end of the cooldown
    /// after the last start if that is later.
    fn next_start(&self) -> Option<u64> {
        let at = self.pending?;
        Some(match self.runs.last() {
            Some(&last) if self.min_interval > 0 => at.max(last + self.min_interval),
            _ => at,
        })
    }

    fn run(&mut self, script: &[Step]) {
        self.runs.push(self.now);
        let step = script[self.step % script.len()];
        self.step += 1;
        self.last_delay = match step {
            Step::Again(d) => Some(d),
            Step::Stop | Step::Panic => None,
            // These return 1 s (superseded by what they did).
            Step::FireSelf | Step::FireAfterSelf(_) | Step::SuspendSelf => Some(1_000_000),
        };
        self.pending = match step {
            Step::Again(d) => Some(coalesced(self.now + d, d)),
            Step::Stop | Step::Panic | Step::SuspendSelf => None,
            Step::FireSelf => Some(self.now),
            Step::FireAfterSelf(d) => Some(self.now + d),
        };
        // A run is served only after a fire: it suspends itself or not.
        self.suspended = step == Step::SuspendSelf;
    }
}

/// The documented rule for a delay `d` a task returns (G15,
/// `Builder::coalesce_periodic`): the deadline moves up to the next multiple
/// of the widest 1-2-5 grid (1 µs … 2 ms) no wider than `d / 500`.
fn coalesced(deadline: u64, d: u64) -> u64 {
    let slack = (d / 500).min(2_000);
    let grid = [2_000, 1_000, 500, 200, 100, 50, 20, 10, 5, 2, 1]
        .into_iter()
        .find(|&g| g <= slack)
        .unwrap_or(1);
    deadline.div_ceil(grid) * grid
}

/// The real thing: a trigger on a virtual scheduler running `script`.
fn scripted(
    sim: &VirtualScheduler,
    version: u32,
    script: Vec<Step>,
) -> (Trigger, Arc<Mutex<Vec<u64>>>) {
    scripted_with(sim, version, script, Duration::ZERO)
}

/// [`scripted`], with a cooldown.
fn scripted_with(
    sim: &VirtualScheduler,
    version: u32,
    script: Vec<Step>,
    min_interval: Duration,
) -> (Trigger, Arc<Mutex<Vec<u64>>>) {
    let runs = Arc::new(Mutex::new(Vec::new()));
    let me: Arc<OnceLock<WeakTrigger>> = Arc::default();
    let (log, cell, clock) = (runs.clone(), me.clone(), sim.clock());
    let mut index = 0;
    let trigger = Trigger::builder(sim)
        .start_version(version)
        .policies(TriggerPolicies::new().min_interval(min_interval))
        .bind(move || {
            log.lock().unwrap().push(clock.now().as_micros() as u64);
            let step = script[index % script.len()];
            index += 1;
            let me = cell
                .get()
                .and_then(WeakTrigger::upgrade)
                .expect("handle alive");
            match step {
                Step::Again(d) => return Some(Duration::from_micros(d)),
                Step::Stop => return None,
                Step::Panic => std::panic::panic_any(Scripted),
                Step::FireSelf => me.fire().unwrap(),
                Step::FireAfterSelf(d) => me.fire_after(Duration::from_micros(d)).unwrap(),
                Step::SuspendSelf => me.suspend(),
            }
            Some(Duration::from_secs(1))
        });
    me.set(trigger.downgrade()).unwrap();
    (trigger, runs)
}

fn apply(trigger: &Trigger, sim: &VirtualScheduler, op: Op) {
    let paused = trigger.stats().paused;
    let fired = match op {
        Op::Fire => trigger.fire(),
        Op::FireAfter(d) => trigger.fire_after(Duration::from_micros(d)),
        Op::FireAt(t) => trigger.fire_at_elapsed(Duration::from_micros(t)),
        Op::Suspend => {
            trigger.suspend();
            Ok(())
        }
        Op::Advance(d) => {
            sim.advance(Duration::from_micros(d));
            return;
        }
        Op::Pause => return trigger.pause(),
        Op::Resume => return assert_eq!(trigger.resume(), Ok(paused)),
        Op::ResumeAfter(d) => {
            return assert_eq!(trigger.resume_after(Duration::from_micros(d)), Ok(paused))
        }
    };
    match fired {
        Ok(()) => assert!(!paused || op == Op::Suspend),
        Err(error) => assert!(paused && error == FireError::Paused, "{op:?}: {error}"),
    }
}

/// Delays under 67 s keep exact microseconds (see `request.rs`).
fn delay() -> impl Strategy<Value = u64> {
    prop_oneof![1u64..100, 100u64..100_000, 100_000u64..60_000_000]
}

/// A task's own re-arm delay: at least 500 µs, so an `Advance` (≤ 2 s)
/// runs a bounded number of iterations.
fn period() -> impl Strategy<Value = u64> {
    prop_oneof![500u64..5_000, 5_000u64..1_000_000, 1_000_000u64..60_000_000]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => period().prop_map(Step::Again),
        1 => Just(Step::Again(0)),
        1 => Just(Step::Stop),
        1 => Just(Step::Panic),
        1 => Just(Step::FireSelf),
        1 => delay().prop_map(Step::FireAfterSelf),
        1 => Just(Step::SuspendSelf),
    ]
}

/// A script that always lets time move on: some step neither re-runs at
/// once (`Again(0)`, `FireSelf`) nor is missing.
fn script() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(step(), 1..6).prop_filter("time must be able to move", |s| {
        s.iter()
            .any(|step| !matches!(step, Step::Again(0) | Step::FireSelf))
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Fire),
        3 => delay().prop_map(Op::FireAfter),
        1 => (0u64..20_000_000).prop_map(Op::FireAt),
        1 => Just(Op::Suspend),
        4 => prop_oneof![0u64..10, 10u64..1_000_000, 1_000_000u64..2_000_000].prop_map(Op::Advance),
        1 => Just(Op::Pause),
        1 => Just(Op::Resume),
        1 => delay().prop_map(Op::ResumeAfter),
    ]
}

fn start_version() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), ((1u32 << 30) - 8..1 << 30)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    /// One trigger: the exact run instants match the reference model.
    #[test]
    fn a_trigger_runs_exactly_when_the_model_says(
        version in start_version(),
        script in script(),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        quiet_scripted_panics();
        let sim = Scheduler::builder().build_virtual();
        let (trigger, runs) = scripted(&sim, version, script.clone());
        let mut model = Model::default();
        for &op in &ops {
            apply(&trigger, &sim, op);
            model.apply(op, &script);
            prop_assert_eq!(&*runs.lock().unwrap(), &model.runs, "after {:?}", op);
            prop_assert_eq!(trigger.stats().paused, model.paused);
        }
    }

    /// One trigger with a cooldown: a run due sooner than `min_interval`
    /// after the previous start waits for the cooldown's end.
    #[test]
    fn a_trigger_with_a_cooldown_runs_when_the_model_says(
        min_interval in 1u64..3_000_000,
        script in script(),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        quiet_scripted_panics();
        let sim = Scheduler::builder().build_virtual();
        let cooldown = Duration::from_micros(min_interval);
        let (trigger, runs) = scripted_with(&sim, 0, script.clone(), cooldown);
        let mut model = Model { min_interval, ..Model::default() };
        for &op in &ops {
            apply(&trigger, &sim, op);
            model.apply(op, &script);
            prop_assert_eq!(&*runs.lock().unwrap(), &model.runs, "after {:?}", op);
            prop_assert_eq!(trigger.stats().paused, model.paused);
        }
    }

    /// Several triggers at once: each follows its own model, whatever the
    /// others do at the same instants.
    #[test]
    fn many_triggers_each_follow_their_model(
        scripts in prop::collection::vec(script(), 2..6),
        ops in prop::collection::vec((any::<prop::sample::Index>(), op()), 1..60),
    ) {
        quiet_scripted_panics();
        let sim = Scheduler::builder().build_virtual();
        let triggers: Vec<_> = scripts.iter().map(|s| scripted(&sim, 0, s.clone())).collect();
        let mut models: Vec<Model> = scripts.iter().map(|_| Model::default()).collect();
        for &(index, op) in &ops {
            match op {
                Op::Advance(_) => {
                    apply(&triggers[0].0, &sim, op);
                    for (model, script) in models.iter_mut().zip(&scripts) {
                        model.apply(op, script);
                    }
                }
                _ => {
                    let i = index.index(triggers.len());
                    apply(&triggers[i].0, &sim, op);
                    models[i].apply(op, &scripts[i]);
                }
            }
        }
        for ((_, runs), model) in triggers.iter().zip(&models) {
            prop_assert_eq!(&*runs.lock().unwrap(), &model.runs);
        }
    }
}

#[test]
fn time_stands_still_until_advanced() {
    let sim = Scheduler::builder().build_virtual();
    let runs = Arc::new(Mutex::new(Vec::new()));
    let (r, clock) = (runs.clone(), sim.clock());
    let trigger = Trigger::bind(&sim, move || {
        r.lock().unwrap().push(clock.now());
        Some(Duration::from_secs(30))
    });
    trigger.fire().unwrap();
    assert!(
        runs.lock().unwrap().is_empty(),
        "nothing runs before advance"
    );
    // A queued fire is due now: a driver loop on `next_deadline` runs it.
    assert_eq!(sim.next_deadline(), Some(Duration::ZERO));
    sim.advance(Duration::ZERO);
    assert_eq!(*runs.lock().unwrap(), [Duration::ZERO]);
    let next = sim.next_deadline().expect("armed");
    assert_eq!(next, Duration::from_secs(30));
    sim.advance(Duration::from_secs(29));
    assert_eq!(runs.lock().unwrap().len(), 1);
    sim.advance_to(Duration::from_secs(90));
    let secs: Vec<u64> = runs.lock().unwrap().iter().map(Duration::as_secs).collect();
    assert_eq!(secs, [0, 30, 60, 90]);
    assert_eq!(sim.now(), Duration::from_secs(90));
}

#[test]
fn iterations_run_in_deadline_order_across_triggers() {
    let sim = Scheduler::builder().build_virtual();
    let order = Arc::new(Mutex::new(Vec::new()));
    let triggers: Vec<_> = [50u64, 10, 40, 20, 30]
        .into_iter()
        .map(|ms| {
            let o = order.clone();
            let t = Trigger::bind(&sim, move || {
                o.lock().unwrap().push(ms);
                None
            });
            t.fire_after(Duration::from_millis(ms)).unwrap();
            t
        })
        .collect();
    sim.advance(Duration::from_secs(1));
    assert_eq!(*order.lock().unwrap(), [10, 20, 30, 40, 50]);
    drop(triggers);
}

#[test]
fn a_task_looping_on_zero_delays_is_reported_not_hung() {
    let sim = Scheduler::builder().build_virtual();
    let trigger = Trigger::bind(&sim, || Some(Duration::ZERO));
    trigger.fire().unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        sim.advance(Duration::from_secs(1));
    }));
    let message = *result.unwrap_err().downcast::<String>().unwrap();
    assert!(message.contains("cannot advance"), "{message}");
}

#[test]
fn shutdown_stops_virtual_time_runs() {
    let sim = Scheduler::builder().build_virtual();
    let runs = Arc::new(Mutex::new(0));
    let r = runs.clone();
    let trigger = Trigger::bind(&sim, move || {
        *r.lock().unwrap() += 1;
        Some(Duration::from_secs(1))
    });
    trigger.fire().unwrap();
    sim.advance(Duration::from_millis(1_500));
    assert_eq!(*runs.lock().unwrap(), 2);
    sim.shutdown();
    assert!(trigger.fire().is_err());
    sim.advance(Duration::from_secs(10));
    assert_eq!(*runs.lock().unwrap(), 2);
    assert!(
        sim.await_termination(Duration::ZERO),
        "no threads to wait for"
    );
}

/// Sets its flag when dropped (with the task that owns it).
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A trigger on `sim` armed for an hour whose task returns `next`, and the
/// flag its task's drop sets.
fn armed_for_an_hour(sim: &VirtualScheduler, next: Option<Duration>) -> (Trigger, Arc<AtomicBool>) {
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = DropFlag(dropped.clone());
    let trigger = Trigger::bind(sim, move || {
        let _keep = &flag;
        next
    });
    trigger.fire_after(Duration::from_secs(3600)).unwrap();
    (trigger, dropped)
}

#[test]
fn dropping_the_last_handle_of_an_armed_trigger_frees_its_task_at_once() {
    // The hour-long deadline is on the wheel (an advance took it in); no
    // advance follows the drop, yet the task goes with the last handle.
    let sim = Scheduler::builder().build_virtual();
    let (trigger, dropped) = armed_for_an_hour(&sim, Some(Duration::from_secs(60)));
    sim.advance(Duration::from_millis(1));
    assert_eq!(sim.next_deadline(), Some(Duration::from_secs(3600)));
    drop(trigger);
    assert!(dropped.load(Ordering::SeqCst), "the wheel let go of it");
    assert_eq!(sim.next_deadline(), None);
    assert!(sim.stats().triggers.is_empty());
}

#[test]
fn dropping_the_last_handle_of_a_trigger_still_in_the_inbox_frees_its_task_at_once() {
    // Armed outside an advance, the trigger waits in the timer's inbox
    // (IN_INBOX set): the drop takes the inbox in at once.
    let sim = Scheduler::builder().build_virtual();
    let (trigger, dropped) = armed_for_an_hour(&sim, None);
    drop(trigger);
    assert!(dropped.load(Ordering::SeqCst), "the inbox let go of it");
    assert_eq!(sim.next_deadline(), None);
}
