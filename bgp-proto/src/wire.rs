//! Small parsers shared by the decoders, in nom's result type. nom stays
//! inside the crate: the decoders map its failures onto the project's own
//! `Error` at each boundary, where the RFC says which NOTIFICATION a
//! truncation causes.

use nom::IResult;

/// nom's result with a unit error: decoders know what a failure means at
/// the point they call the parser, so nom need not carry it.
pub(crate) type Res<'a, T> = IResult<&'a [u8], T, ()>;

// The fixed-size fields are read with `split_first_chunk` rather than
// nom's `be_u8`/`be_u16`/`be_u32`: those go through `Input::take_from`,
// which stayed an out-of-line call per field in the decode profile.

/// The next `N` octets as an array.
#[inline]
fn chunk<const N: usize>(input: &[u8]) -> Res<'_, [u8; N]> {
    match input.split_first_chunk::<N>() {
        Some((value, rest)) => Ok((rest, *value)),
        None => Err(nom::Err::Error(())),
    }
}

#[inline]
pub(crate) fn u8(input: &[u8]) -> Res<'_, u8> {
    let (rest, [v]) = chunk(input)?;
    Ok((rest, v))
}

#[inline]
pub(crate) fn u16(input: &[u8]) -> Res<'_, u16> {
    let (rest, v) = chunk(input)?;
    Ok((rest, u16::from_be_bytes(v)))
}

#[inline]
pub(crate) fn u32(input: &[u8]) -> Res<'_, u32> {
    let (rest, v) = chunk(input)?;
    Ok((rest, u32::from_be_bytes(v)))
}

/// The next `n` octets.
#[inline]
pub(crate) fn take(n: usize) -> impl Fn(&[u8]) -> Res<'_, &[u8]> {
    move |input| match input.split_at_checked(n) {
        Some((value, rest)) => Ok((rest, value)),
        None => Err(nom::Err::Error(())),
    }
}

pub(crate) fn ipv4(input: &[u8]) -> Res<'_, std::net::Ipv4Addr> {
    let (rest, v) = u32(input)?;
    Ok((rest, std::net::Ipv4Addr::from(v)))
}

/// Writes a big-endian u16 length placeholder and returns its position.
pub(crate) fn length_placeholder(out: &mut Vec<u8>) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0, 0]);
    at
}

/// Fills a placeholder written by `length_placeholder` with the number of
/// octets written after it. Lengths beyond u16 are caught by the message
/// encoder's total-length check, which such a length always trips.
pub(crate) fn fill_length(out: &mut [u8], at: usize) {
    let len = out.len() - at - 2;
    let len = u16::try_from(len).unwrap_or(u16::MAX);
    out[at..at + 2].copy_from_slice(&len.to_be_bytes());
}
