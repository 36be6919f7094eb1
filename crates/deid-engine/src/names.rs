//! Names of enum values, written once: [`enum_names!`] turns one table of `Variant => "name"`
//! rows into the list of values, the list of names, the value → name function and the exact
//! name → value lookup (with aliases), so that no name is written twice and every "expected one
//! of …" message lists exactly the names that parse. Used by the engine's and the service's
//! enums alike; [`alternatives`] words a list of names for messages.

use std::fmt::{Display, Write};

/// Declares the names of a field-less enum's values: one table, from which it generates, in an
/// `impl` block of the enum,
///
/// - `ALL: [Self; N]`, every value in the table's order (the table must list every variant: the
///   generated `match` fails to compile otherwise);
/// - `NAMES: [&str; N]`, the name of each value of `ALL`;
/// - the value → name function, named and documented as the invocation says (`name`, `as_str`);
/// - optionally (a second function line) the exact lookup `&str → Option<Self>` of a name or one
///   of its aliases (`"improved-greedy" | "igreedy"`), named as the invocation says (`parse`,
///   `from_name`); a case-insensitive `parse` normalizes its input and calls this one;
/// - with `: Display` after the enum's name, `Display` writing the name.
///
/// Generated items take the visibility of the name function. A name or alias listed twice fails
/// the build.
///
/// ```
/// #[derive(Debug, Clone, Copy, PartialEq)]
/// enum Fruit {
///     Apple,
///     Pear,
/// }
///
/// deid_engine::names::enum_names! {
///     Fruit: Display {
///         Apple => "apple" | "malus",
///         Pear => "pear",
///     }
///     /// The fruit's name.
///     pub fn name;
///     /// The fruit named `name` (or `malus` for the apple).
///     pub fn parse;
/// }
///
/// assert_eq!(Fruit::ALL, [Fruit::Apple, Fruit::Pear]);
/// assert_eq!(Fruit::NAMES, ["apple", "pear"]);
/// assert_eq!(Fruit::Pear.name(), "pear");
/// assert_eq!(Fruit::parse("malus"), Some(Fruit::Apple));
/// assert_eq!(Fruit::parse("Apple"), None);
/// assert_eq!(Fruit::Apple.to_string(), "apple");
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! __enum_names {
    (
        $ty:ident $(: $display:ident)? {
            $( $variant:ident => $name:literal $(| $alias:literal)* ),+ $(,)?
        }
        $(#[$name_doc:meta])*
        $vis:vis fn $name_fn:ident;
        $(
            $(#[$parse_doc:meta])*
            $parse_vis:vis fn $parse_fn:ident;
        )?
    ) => {
        impl $ty {
            #[doc = concat!("Every `", stringify!($ty), "`, in the order of its names table.")]
            #[allow(dead_code)]
            $vis const ALL: [$ty; [$(stringify!($variant)),+].len()] = [$($ty::$variant),+];

            #[doc = concat!("The name of each value of [`", stringify!($ty), "::ALL`].")]
            #[allow(dead_code)]
            $vis const NAMES: [&'static str; [$(stringify!($variant)),+].len()] = [$($name),+];

            $(#[$name_doc])*
            $vis fn $name_fn(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }

        const _: () = assert!(
            $crate::names::distinct(&[$($name, $($alias,)*)+]),
            concat!("a name of `", stringify!($ty), "` is listed twice")
        );
        $crate::names::enum_names!(
            @lookup $ty [$($(#[$parse_doc])* $parse_vis fn $parse_fn;)?]
            { $($variant => $name $(| $alias)*),+ }
        );
        $($crate::names::enum_names!(@impl $display $ty $name_fn);)?
    };
    (@lookup $ty:ident [] { $($table:tt)* }) => {};
    (
        @lookup $ty:ident [$(#[$doc:meta])* $vis:vis fn $parse_fn:ident;]
        { $($variant:ident => $name:literal $(| $alias:literal)*),+ }
    ) => {
        impl $ty {
            $(#[$doc])*
            $vis fn $parse_fn(name: &str) -> Option<$ty> {
                match name {
                    $($name $(| $alias)* => Some($ty::$variant),)+
                    _ => None,
                }
            }
        }
    };
    (@impl Display $ty:ident $name_fn:ident) => {
        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.$name_fn())
            }
        }
    };
}

#[doc(inline)]
pub use crate::__enum_names as enum_names;

/// True if no two of `names` are equal: [`enum_names!`] checks its table with it when the
/// table is compiled.
#[doc(hidden)]
pub const fn distinct(names: &[&str]) -> bool {
    let mut i = 0;
    while i < names.len() {
        let mut j = i + 1;
        while j < names.len() {
            if same(names[i].as_bytes(), names[j].as_bytes()) {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

/// Byte-wise equality, usable in constants.
const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut k = 0;
    while k < a.len() {
        if a[k] != b[k] {
            return false;
        }
        k += 1;
    }
    true
}

/// The names as a reader expects a choice: `a`, `a or b`, `a, b or c`.
pub fn alternatives<T: Display>(names: impl IntoIterator<Item = T>) -> String {
    let names: Vec<T> = names.into_iter().collect();
    let mut text = String::new();
    for (i, name) in names.iter().enumerate() {
        let separator = match i {
            0 => "",
            _ if i + 1 == names.len() => " or ",
            _ => ", ",
        };
        let _ = write!(text, "{separator}{name}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table with an alias, a private lookup and `Display`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Colour {
        Red,
        DarkBlue,
        Green,
    }

    enum_names! {
        Colour: Display {
            Red => "red",
            DarkBlue => "dark-blue" | "navy" | "dark_blue",
            Green => "green",
        }
        /// The colour's name.
        fn name;
        /// The colour named `name`.
        fn from_name;
    }

    /// A table without a lookup or `Display`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Side {
        Left,
        Right,
    }

    enum_names! {
        Side {
            Left => "left",
            Right => "right",
        }
        /// The side's name.
        fn as_str;
    }

    /// Every value's name parses back to it, `ALL` and `NAMES` agree and list every value once,
    /// aliases parse to their value, and nothing else parses (not even another case or
    /// surrounding blanks).
    #[test]
    fn names_round_trip_and_aliases_parse() {
        assert_eq!(Colour::ALL, [Colour::Red, Colour::DarkBlue, Colour::Green]);
        assert_eq!(Colour::NAMES, ["red", "dark-blue", "green"]);
        for (value, name) in Colour::ALL.into_iter().zip(Colour::NAMES) {
            assert_eq!(value.name(), name);
            assert_eq!(value.to_string(), name);
            assert_eq!(Colour::from_name(name), Some(value));
        }
        for alias in ["navy", "dark_blue"] {
            assert_eq!(Colour::from_name(alias), Some(Colour::DarkBlue), "{alias}");
        }
        for unknown in ["", "Red", "RED", " red", "red ", "blue", "dark", "navy,red"] {
            assert_eq!(Colour::from_name(unknown), None, "{unknown:?}");
        }
        // An alias is accepted but never written.
        assert!(!Colour::NAMES.contains(&"navy"));

        assert_eq!(Side::ALL, [Side::Left, Side::Right]);
        assert_eq!(Side::NAMES, ["left", "right"]);
        assert_eq!(Side::Right.as_str(), "right");
    }

    /// The check of a table refuses a repeated name or alias, and only that.
    #[test]
    fn repeated_names_are_found() {
        assert!(distinct(&[]));
        assert!(distinct(&["a", "ab", "b", "ba", ""]));
        assert!(!distinct(&["a", "b", "a"]));
        assert!(!distinct(&["red", "navy", "green", "navy"]));
        assert!(!distinct(&["", ""]));
    }

    #[test]
    fn alternatives_read_as_a_choice() {
        assert_eq!(alternatives::<&str>([]), "");
        assert_eq!(alternatives(["a"]), "a");
        assert_eq!(alternatives(["a", "b"]), "a or b");
        assert_eq!(alternatives(Colour::NAMES), "red, dark-blue or green");
        assert_eq!(
            alternatives(Side::NAMES.map(|n| format!("'{n}'"))),
            "'left' or 'right'"
        );
    }
}
