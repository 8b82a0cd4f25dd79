"""tenancy"""
