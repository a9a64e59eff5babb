use super::*;

fn parse(text: &str) -> Result<Pid, ParsePidError> {
    text.parse()
}

#[test]
fn display_is_node_dot_id_in_angle_brackets() {
    assert_eq!(Pid::new(0, 0).to_string(), "<outside>");
    assert_eq!(Pid::new(0, 1).to_string(), "<0.1>");
    assert_eq!(Pid::new(12, 345).to_string(), "<12.345>");
    assert_eq!(
        Pid::new(u32::MAX, u64::MAX).to_string(),
        "<4294967295.18446744073709551615>"
    );
    assert_eq!(format!("{:?}", Pid::local(8)), "<0.8>");
}

#[test]
fn parses_extremes() {
    assert_eq!(parse("<0.0>"), Ok(Pid::new(0, 0)));
    assert_eq!(
        parse("<4294967295.18446744073709551615>"),
        Ok(Pid::new(u32::MAX, u64::MAX))
    );
}

#[test]
fn ordering_is_by_node_then_id() {
    assert!(Pid::new(0, 5) < Pid::new(0, 6));
    assert!(Pid::new(0, u64::MAX) < Pid::new(1, 0));
}

#[test]
fn empty() {
    assert_eq!(parse(""), Err(ParsePidError::Empty));
}

#[test]
fn missing_opening_bracket() {
    assert_eq!(parse("0.1>"), Err(ParsePidError::MissingOpeningBracket));
    assert_eq!(parse(" <0.1>"), Err(ParsePidError::MissingOpeningBracket));
}

#[test]
fn missing_closing_bracket() {
    assert_eq!(parse("<"), Err(ParsePidError::MissingClosingBracket));
    assert_eq!(parse("<0.1"), Err(ParsePidError::MissingClosingBracket));
}

#[test]
fn trailing_characters() {
    assert_eq!(parse("<0.1>>"), Err(ParsePidError::TrailingCharacters));
    assert_eq!(parse("<0.1>\n"), Err(ParsePidError::TrailingCharacters));
}

#[test]
fn missing_separator() {
    assert_eq!(parse("<>"), Err(ParsePidError::MissingSeparator));
    assert_eq!(parse("<01>"), Err(ParsePidError::MissingSeparator));
    assert_eq!(parse("<0:1>"), Err(ParsePidError::MissingSeparator));
}

#[test]
fn invalid_node() {
    use NumberError::*;
    assert_eq!(parse("<.1>"), Err(ParsePidError::InvalidNode(Empty)));
    assert_eq!(
        parse("<+1.1>"),
        Err(ParsePidError::InvalidNode(InvalidDigit))
    );
    assert_eq!(
        parse("< 1.1>"),
        Err(ParsePidError::InvalidNode(InvalidDigit))
    );
    assert_eq!(
        parse("<0x.1>"),
        Err(ParsePidError::InvalidNode(InvalidDigit))
    );
    assert_eq!(
        parse("<01.1>"),
        Err(ParsePidError::InvalidNode(LeadingZero))
    );
    assert_eq!(
        parse("<00.1>"),
        Err(ParsePidError::InvalidNode(LeadingZero))
    );
    assert_eq!(
        parse("<4294967296.1>"),
        Err(ParsePidError::InvalidNode(Overflow))
    );
    assert_eq!(
        parse("<99999999999999999999999.1>"),
        Err(ParsePidError::InvalidNode(Overflow))
    );
}

#[test]
fn invalid_id() {
    use NumberError::*;
    assert_eq!(parse("<1.>"), Err(ParsePidError::InvalidId(Empty)));
    assert_eq!(parse("<1.-1>"), Err(ParsePidError::InvalidId(InvalidDigit)));
    assert_eq!(
        parse("<1.1.1>"),
        Err(ParsePidError::InvalidId(InvalidDigit))
    );
    assert_eq!(parse("<1.١>"), Err(ParsePidError::InvalidId(InvalidDigit)));
    assert_eq!(parse("<1.01>"), Err(ParsePidError::InvalidId(LeadingZero)));
    assert_eq!(
        parse("<1.18446744073709551616>"),
        Err(ParsePidError::InvalidId(Overflow))
    );
}

#[test]
fn a_bad_digit_after_an_overflow_is_reported_as_a_bad_digit() {
    assert_eq!(
        parse("<1.99999999999999999999x>"),
        Err(ParsePidError::InvalidId(NumberError::InvalidDigit))
    );
    assert_eq!(
        parse("<1.0x>"),
        Err(ParsePidError::InvalidId(NumberError::InvalidDigit))
    );
}

#[test]
fn errors_display_what_was_wrong_and_chain_their_source() {
    let err = parse("<1.x>").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid PID id number: not a decimal digit"
    );
    let source = err.source().map(ToString::to_string);
    assert_eq!(source.as_deref(), Some("not a decimal digit"));
    assert!(ParsePidError::Empty.source().is_none());
    for err in [
        ParsePidError::Empty,
        ParsePidError::MissingOpeningBracket,
        ParsePidError::MissingClosingBracket,
        ParsePidError::TrailingCharacters,
        ParsePidError::MissingSeparator,
        ParsePidError::InvalidNode(NumberError::Empty),
        ParsePidError::InvalidId(NumberError::LeadingZero),
        ParsePidError::InvalidId(NumberError::Overflow),
    ] {
        assert!(!err.to_string().is_empty());
    }
}
