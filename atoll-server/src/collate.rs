//! The collation locale (`locale-collate`): how SORT … ALPHA and Lua's string comparisons
//! order text, as Redis orders it with `strcoll(3)` under `setlocale(LC_COLLATE, …)`.
//!
//! Redis is one thread and sets the process's locale. Atoll's workers sort and run scripts
//! while CONFIG SET may change the setting on another one, and `setlocale` is not safe
//! against concurrent `strcoll`; so the setting is a `locale_t` made with `newlocale` (only
//! LC_COLLATE from the name; numbers and the rest stay "C", as Redis leaves them), and each
//! thread adopts the newest one with `uselocale` before it compares (`enter`). `strcoll` then
//! reads the thread's locale — Lua's `<` on strings (lvm.c `l_strcmp`) included. A locale
//! once made is never freed: a thread may still be comparing with it, and there are only as
//! many as CONFIG SETs of this parameter.

use std::cell::Cell;
use std::cmp::Ordering;
use std::ffi::CString;
use std::sync::atomic::{AtomicPtr, Ordering as AtOrd};

/// One setting of the parameter: the locale object and whether it orders as bytes do.
struct Setting {
    locale: libc::locale_t,
    bytewise: bool,
}

/// The newest setting (null until `set` is first called: the C locale's order). Settings are
/// leaked on purpose: a thread may still be comparing under an older one.
static CURRENT: AtomicPtr<Setting> = AtomicPtr::new(std::ptr::null_mut());

thread_local! {
    /// The setting this thread adopted with `uselocale`.
    static ADOPTED: Cell<*const Setting> = const { Cell::new(std::ptr::null()) };
}

/// Makes `name` the collation locale ("" takes it from the environment — LC_ALL,
/// LC_COLLATE, LANG — as Redis's start-up does). Redis's words when the name is unknown.
pub fn set(name: &str) -> Result<(), &'static str> {
    const INVALID: &str = "Invalid locale name";
    let c = CString::new(name).map_err(|_| INVALID)?;
    // SAFETY: newlocale copies what it needs from the name; base 0 makes a fresh object
    // whose other categories are the C locale's.
    let locale = unsafe { libc::newlocale(libc::LC_COLLATE_MASK, c.as_ptr(), std::ptr::null_mut()) };
    if locale.is_null() {
        return Err(INVALID);
    }
    let setting = Box::new(Setting { locale, bytewise: orders_bytewise(name) });
    CURRENT.store(Box::into_raw(setting), AtOrd::Release);
    Ok(())
}

/// Whether the locale `name` names orders as `strcmp` does: glibc's C and POSIX locales, and
/// C.UTF-8, whose collation is code-point order, which is byte order for UTF-8. "" is read
/// from the environment as setlocale reads it.
fn orders_bytewise(name: &str) -> bool {
    let name = if name.is_empty() {
        ["LC_ALL", "LC_COLLATE", "LANG"]
            .iter()
            .filter_map(|v| std::env::var(v).ok())
            .find(|v| !v.is_empty())
            .unwrap_or_default()
    } else {
        name.to_string()
    };
    name.is_empty() || name == "C" || name == "POSIX" || name.starts_with("C.")
}

/// Adopts the newest collation locale on this thread (one atomic load when it already has
/// it). Called before a script runs, whose string comparisons call `strcoll`.
pub fn enter() -> Collator {
    let now = CURRENT.load(AtOrd::Acquire);
    ADOPTED.with(|adopted| {
        if !std::ptr::eq(adopted.get(), now) && !now.is_null() {
            // SAFETY: `now` is a leaked Box from `set`, never freed; its locale came from
            // newlocale.
            unsafe { libc::uselocale((*now).locale) };
            adopted.set(now);
        }
    });
    // SAFETY: as above.
    Collator { bytewise: now.is_null() || unsafe { (*now).bytewise } }
}

/// Compares strings under the locale its thread adopted when it was made, so one sort sees
/// one order even if CONFIG SET changes the setting meanwhile (Rust's sort needs a total
/// order).
#[derive(Clone, Copy)]
pub struct Collator {
    bytewise: bool,
}

impl Collator {
    /// Orders two strings as Redis's `strcoll` on its NUL-terminated strings does: each is
    /// read up to its first NUL byte.
    pub fn compare(self, a: &[u8], b: &[u8]) -> Ordering {
        if self.bytewise {
            return upto_nul(a).cmp(upto_nul(b));
        }
        self.compare_keys(&sort_key(a), &sort_key(b))
    }

    /// `compare` of two `sort_key`s (a sort makes each key once, not once per comparison).
    pub fn compare_keys(self, a: &CString, b: &CString) -> Ordering {
        if self.bytewise {
            return a.as_bytes().cmp(b.as_bytes());
        }
        // SAFETY: two C strings; strcoll reads this thread's locale, adopted by `enter`.
        unsafe { libc::strcoll(a.as_ptr(), b.as_ptr()) }.cmp(&0)
    }
}

fn upto_nul(s: &[u8]) -> &[u8] {
    &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]
}

/// The string up to its first NUL, as a C string: what `strcoll` sees of it.
pub fn sort_key(s: &[u8]) -> CString {
    CString::new(upto_nul(s)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_locale_orders_bytes_up_to_a_nul() {
        set("C").unwrap();
        let c = enter();
        assert_eq!(c.compare(b"B", b"a"), Ordering::Less);
        assert_eq!(c.compare(b"a\0z", b"a\0b"), Ordering::Equal);
        assert_eq!(c.compare_keys(&sort_key(b"ab"), &sort_key(b"b")), Ordering::Less);
        assert_eq!(set("no-such-locale"), Err("Invalid locale name"));
    }
}
