//! Host networking over rtnetlink (the only module that uses neli).
