//! Properties of the PID textual form `<node.id>`.
#![cfg(not(loom))]

use proptest::prelude::*;
use relay::{ParsePidError, Pid};

fn cases() -> ProptestConfig {
    ProptestConfig::with_cases(if cfg!(miri) { 16 } else { 2048 })
}

/// Any PID, with the extremes of both components drawn often.
fn any_pid() -> impl Strategy<Value = Pid> {
    let node = prop_oneof![Just(0_u32), Just(u32::MAX), any::<u32>()];
    let id = prop_oneof![Just(0_u64), Just(u64::MAX), any::<u64>()];
    (node, id).prop_map(|(node, id)| Pid::new(node, id))
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn display_then_parse_round_trips(pid in any_pid()) {
        let text = pid.to_string();
        prop_assert_eq!(text.parse::<Pid>(), Ok(pid));
        prop_assert_eq!(format!("{pid:?}"), text);
    }

    #[test]
    fn parse_of_arbitrary_text_never_panics_and_accepts_only_canonical_text(text in any::<String>()) {
        if let Ok(pid) = text.parse::<Pid>() {
            prop_assert_eq!(pid.to_string(), text);
        }
    }

    #[test]
    fn parse_of_pid_shaped_text_accepts_only_canonical_text(
        text in r"<?[0-9+\- ]{0,22}[.:]?[0-9a-z+\- ]{0,22}>?.{0,2}"
    ) {
        match text.parse::<Pid>() {
            Ok(pid) => prop_assert_eq!(pid.to_string(), text),
            Err(err) => prop_assert!(!err.to_string().is_empty()),
        }
    }

    #[test]
    fn distinct_pids_have_distinct_text(a in any_pid(), b in any_pid()) {
        prop_assert_eq!(a == b, a.to_string() == b.to_string());
    }

    #[test]
    fn dropping_one_character_never_yields_the_same_pid(pid in any_pid(), cut in 0_usize..40) {
        let text = pid.to_string();
        let cut = cut % text.len();
        let mangled: String = text
            .char_indices()
            .filter(|&(i, _)| i != cut)
            .map(|(_, c)| c)
            .collect();
        match mangled.parse::<Pid>() {
            Ok(other) => {
                prop_assert_ne!(other, pid);
                prop_assert_eq!(other.to_string(), mangled);
            }
            Err(err) => prop_assert_ne!(err, ParsePidError::Empty),
        }
    }
}
