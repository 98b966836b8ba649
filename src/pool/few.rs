//! `Few`: a few values in order, without an allocation while there is
//! only one (most scheduling calls replace at most one task).

/// A few values in order, without an allocation while there is only one
/// (most scheduling calls replace at most one task).
pub(crate) struct Few<T> {
    /// The first value, while it is the only one.
    first: Option<T>,
    /// All values, once there are two or more.
    all: Vec<T>,
}

impl<T> Few<T> {
    /// None yet.
    pub(crate) fn new() -> Self {
        Few {
            first: None,
            all: Vec::new(),
        }
    }

    /// True while there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none() && self.all.is_empty()
    }

    /// Add a value at the end.
    pub(crate) fn push(&mut self, value: T) {
        if self.all.is_empty() && self.first.is_none() {
            self.first = Some(value);
            return;
        }
        self.all.extend(self.first.take());
        self.all.push(value);
    }
}

impl<T> Extend<T> for Few<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, values: I) {
        values.into_iter().for_each(|v| self.push(v));
    }
}

impl<T> IntoIterator for Few<T> {
    type Item = T;
    type IntoIter = std::iter::Chain<std::option::IntoIter<T>, std::vec::IntoIter<T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.all)
    }
}
